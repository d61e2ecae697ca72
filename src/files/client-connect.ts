// Opening a file client's session: the control pipe (token proof, resume key, negotiate), then
// the RDMA connection over the first provider both ends have, made with sabre's cm, and its
// authentication with the negotiated key (./client-session.ts). Also the pipeline depths a
// session's transfers run at, fitted to the device's segment size.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { connect } from '../cm/index.js';
import type { DeviceAddress } from '../core/address.js';
import { rejectionReason } from '../core/errors.js';
import { Access } from '../core/enums.js';
import { type Device, openDevice } from '../verbs/device.js';
import { FILE_CM_REJECTS, FILE_SERVICE, FILE_SLOT_BYTES, FileOp, FileProvider } from '../wire/files-spec.js';
import { ClientConnection, type NegotiatedLimits } from './client-core.js';
import { ClientSession, HDR_AREA, MAX_INLINE, RECV_SIZE } from './client-session.js';
import { RESERVE } from './credits.js';
import { HDR_LEN, bodyLength } from './messages.js';
import { type Negotiated, PipeClient } from './pipe.js';
import type { Provider } from './server.js';
import { FileError, LocalCode, statusCode } from './status.js';

export interface ConnectOptions {
  /** The server's token (never sent: the pipe proves it). */
  token: string;
  /** Providers in order of preference. Default ['udp', 'tcp']. */
  transport?: Provider | Provider[];
  /** Whole connect deadline (ms). Default 10 000. */
  timeoutMs?: number;
  /**
   * Deadline of each request after connect (ms; 0: none). Default 60 000. A request without an
   * answer by then is cancelled; if the server answers the Cancel (within the deadline again, at
   * most 10 s) only that operation fails, with ERR_FILE_TIMEOUT; if it does not, the session
   * fails with ERR_FILE_TIMEOUT. Large reads and writes, get and put are cut into requests of at
   * most maxReadWriteSize / maxWriteSize, each with its own deadline, so the size of a transfer
   * does not count; what can take long is one file-system call at the server — a Close that
   * fsyncs (put --fsync, OpenOptions.fsync) a large file on slow storage: raise it for those.
   */
  requestTimeoutMs?: number;
  /**
   * Credits the server may hold (our receives for its messages: each interrupt-mode completion
   * spends one). Default 16: as many as the requests a server lets us have outstanding (its
   * default credits, on every provider).
   */
  credits?: number;
  /** Status slots: the most requests outstanding at once. Default 64. */
  statusSlots?: number;
  /**
   * Registered read sinks of maxReadWriteSize each: the reads a get keeps in flight. Default 16
   * (udp; its acknowledgements are slower to come back than tcp's, so more must be in flight to
   * keep the wire busy), 8 (tcp, inproc).
   */
  sinks?: number;
  /** Registered write buffers of maxWriteSize each: the writes a put keeps in flight. Default 16 (udp), 8 (tcp, inproc). */
  writeBuffers?: number;
  /** Default completion mode of requests. Default 'interrupt'. */
  mode?: 'interrupt' | 'poll';
  /** Polling: look at a slot for this long before asking for an InterruptResponse (ms). Default 2. */
  spinMs?: number;
  /** Reach the server's RDMA device here instead of (pipe host, negotiated port): a relay, a forwarded port. */
  via?: { host: string; port: number };
  /** udp device options (openDevice's). */
  mtu?: number;
  /** NIC threads of the client's device (openDevice's `workers`; 0 runs it inline). */
  workers?: number;
  /** Cut get/put/read/write at whole segments of the device's mss (fitToSegments). Default true; false: at the negotiated maxima. */
  segmentFit?: boolean;
  /** The integrity check of the client's device (openDevice's): udp 'xxh3' (default), 'crc32c', 'none'; tcp 'crc32c' (default), 'none' ('xxh3' leaves it at its default). */
  integrity?: 'crc32c' | 'xxh3' | 'none';
}

/** Pipeline depths by provider (ConnectOptions.sinks / writeBuffers / credits when not given). */
const PIPELINE_DEFAULTS: Record<Provider, { sinks: number; writeBuffers: number; credits: number }> = {
  udp: { sinks: 16, writeBuffers: 16, credits: 16 },
  tcp: { sinks: 8, writeBuffers: 8, credits: 16 },
  inproc: { sinks: 8, writeBuffers: 8, credits: 16 },
};

/** Bytes before the data in a Write's Send (header and body). */
const WRITE_HDR = HDR_LEN + bodyLength({ op: FileOp.Write, fileId: 0, offset: 0, length: 0, dataOff: 0 });

/**
 * The largest size ≤ `max` whose message (`hdr` bytes, then the data) fills whole segments of
 * `mss`: a message of k·mss + a little goes as k full datagrams and one nearly empty one (the
 * transport does not re-cut segments), so a transfer cut at the fitted size sends ~6% fewer
 * datagrams for 1 MiB reads at a 64 KB mss, and 20% fewer for 256 KiB writes. `max` when no
 * whole segment fits.
 */
export function fitToSegments(max: number, hdr: number, mss: number): number {
  const k = Math.floor((max + hdr) / mss);
  // Never below 1: readInto and write step through a request by this size (the limits are
  // checked at authentication; this is the second guard against a loop that never ends).
  return Math.max(1, k >= 1 && k * mss - hdr > 0 ? k * mss - hdr : max);
}

/** The pipeline of get and put for `limits` (see FileClient.pipeline). */
export function pipelineOf(opts: ConnectOptions, transport: Provider, limits: NegotiatedLimits | undefined, mss: number): { sinks: number; writeBuffers: number; readChunk: number; writeChunk: number } {
  const d = PIPELINE_DEFAULTS[transport];
  // Without fitting, a segment as large as the maxima leaves them as they are.
  const seg = opts.segmentFit === false ? 0x7fff_ffff : mss;
  return {
    sinks: opts.sinks ?? d.sinks, writeBuffers: opts.writeBuffers ?? d.writeBuffers,
    readChunk: limits ? fitToSegments(limits.maxReadWriteSize, 0, seg) : 0, writeChunk: limits ? fitToSegments(limits.maxWriteSize, WRITE_HDR, seg) : 0,
  };
}

function parseTarget(t: string | { host: string; port: number }): { host: string; port: number } {
  if (typeof t !== 'string') return t;
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(t);
  if (!m) throw new FileError('ERR_FILE_INVALID_PARAMETER', `expected HOST:PORT, got '${t}'`);
  return { host: m[1]!, port: Number(m[2]) };
}

/**
 * Open a session with the file server at `target` ('host:port' of its control pipe): prove the
 * token, negotiate a provider, connect and authenticate the RDMA connection.
 */
export async function openSession(target: string | { host: string; port: number }, opts: ConnectOptions): Promise<ClientSession> {
  if (!opts || typeof opts.token !== 'string' || opts.token.length === 0) throw new FileError('ERR_FILE_INVALID_PARAMETER', 'connect needs { token }');
  const rt = opts.requestTimeoutMs;
  if (rt !== undefined && (typeof rt !== 'number' || !(rt >= 0))) throw new FileError('ERR_FILE_INVALID_PARAMETER', `requestTimeoutMs must be a number ≥ 0 (0: none), got ${String(rt)}`);
  const server = parseTarget(target);
  const prefs = ([] as Provider[]).concat(opts.transport ?? ['udp', 'tcp']);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  const left = (): number => Math.max(1, deadline - Date.now());
  let providers = 0;
  for (const p of prefs) providers |= FileProvider[p];

  // 1. The control pipe: token proof, resume key, negotiate.
  const pipe = net.connect({ host: server.host, port: server.port, noDelay: true });
  const pc = new PipeClient({ token: opts.token, providers, random: (n) => new Uint8Array(randomBytes(n)) });
  let neg: Negotiated;
  try {
    neg = await new Promise<Negotiated>((resolve, reject) => {
      const t = setTimeout(() => reject(new FileError(LocalCode.Timeout, `no answer from ${server.host}:${server.port} within ${timeoutMs} ms`)), left());
      const flush = (): void => {
        for (let e = pc.pollAction(); e; e = pc.pollAction()) {
          if (e.kind === 'write') pipe.write(e.bytes);
          else if (e.kind === 'error') {
            clearTimeout(t);
            reject(new FileError(statusCode(e.status), e.message, e.status));
          } else {
            clearTimeout(t);
            resolve(e.result);
          }
        }
      };
      pipe.on('connect', flush);
      pipe.on('data', (b: Buffer) => {
        pc.handleReceive(new Uint8Array(b.buffer, b.byteOffset, b.byteLength), performance.now());
        flush();
      });
      pipe.once('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(t);
        reject(new FileError(LocalCode.ConnectionLost, `cannot reach ${server.host}:${server.port}: ${e.code ?? e.message}`, undefined, { cause: e }));
      });
      pipe.once('close', () => {
        clearTimeout(t);
        reject(new FileError(LocalCode.ConnectionLost, `${server.host}:${server.port} closed the connection during the handshake`));
      });
    });
  } catch (e) {
    pipe.destroy();
    throw e;
  }
  pipe.removeAllListeners('data');
  pipe.removeAllListeners('connect');
  pipe.removeAllListeners('close');
  pipe.removeAllListeners('error');
  pipe.on('error', () => {});

  // 2. The RDMA connection over the first provider of ours the server has.
  const transport = prefs.find((p) => neg.providers & FileProvider[p]);
  if (!transport) {
    // A Success naming none of ours (0, or only providers we did not ask for): the server broke
    // the negotiate (an honest one answers NoCommonProvider).
    pipe.destroy();
    throw new FileError(LocalCode.ProtocolError, `the server named no provider we asked for (${prefs.join(', ')}; it named ${neg.providers})`);
  }
  const localHost = (pipe.localAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
  let dev: Device | undefined;
  try {
    dev = transport === 'inproc' ? await openDevice({ transport: 'inproc' })
      : await openDevice({
        transport, host: localHost, port: 0, ...(opts.mtu ? { mtu: opts.mtu } : {}), ...(opts.workers !== undefined ? { workers: opts.workers } : {}),
        // tcp has MPA's CRC or nothing: 'xxh3' leaves it at its default.
        ...(opts.integrity && !(transport === 'tcp' && opts.integrity === 'xxh3') ? { integrity: opts.integrity } : {}),
      });
    const address: DeviceAddress = transport === 'inproc' ? { transport: 'inproc', id: neg.inprocId }
      : { transport, host: opts.via?.host ?? server.host, port: opts.via?.port ?? (transport === 'udp' ? neg.udpPort : neg.tcpPort) };
    const credits = opts.credits ?? PIPELINE_DEFAULTS[transport].credits;
    const statusSlots = opts.statusSlots ?? 64;
    const pd = dev.allocPd();
    const status = pd.regMr(statusSlots * FILE_SLOT_BYTES, Access.LocalWrite | Access.RemoteWrite);
    const recv = pd.regMr((credits + RESERVE) * RECV_SIZE, Access.LocalWrite);
    const hdrs = pd.regMr(statusSlots * HDR_AREA, Access.LocalWrite);
    const scratch = pd.regMr(MAX_INLINE, Access.LocalWrite);
    const cq = dev.createCq({ depth: 2 * (statusSlots + credits) + 64 });
    const qp = await connect(dev, address, {
      pd, service: FILE_SERVICE, timeoutMs: left(),
      qpInit: { sendCq: cq, recvCq: cq, maxSendWr: statusSlots + credits + 16, maxRecvWr: credits + RESERVE + 1, maxSge: 2, maxInline: MAX_INLINE, timeoutMs: 8000 },
      setup: (q) => {
        for (let i = 0; i < credits + RESERVE; i++) q.postRecv({ wrId: i, sgList: [{ addr: recv.addr + i * RECV_SIZE, length: RECV_SIZE, lkey: recv.lkey }] });
      },
    }).catch((e: Error) => {
      // The server's refusal for its connection bounds (FILE_CM_REJECTS): its status, not a lost connection.
      const reason = rejectionReason(e);
      const refusal = FILE_CM_REJECTS.find((r) => r.reason === reason);
      if (refusal) throw new FileError(statusCode(refusal.status), `the server refused: ${refusal.reason}`, refusal.status, { cause: e });
      throw new FileError(LocalCode.ConnectionLost, `cannot connect the ${transport} RDMA connection to ${JSON.stringify(address)}: ${e.message}`, undefined, { cause: e });
    });
    const core = new ClientConnection({ credits, statusSlots, receiveSize: RECV_SIZE });
    // 3. Authenticate the connection with the negotiated key; wait for the status response.
    const session = new ClientSession({ transport, server, dev, pipe, pc, address, qp, cq, core, status, recv, hdrs, scratch, opts });
    await session.authenticate(neg, left(), (limits) => pipelineOf(opts, transport, limits, session.mss));
    return session;
  } catch (e) {
    pipe.destroy();
    await dev?.close().catch(() => {});
    throw e;
  }
}

