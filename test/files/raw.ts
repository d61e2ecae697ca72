// A hostile (or merely raw) file-service client for tests: the real control pipe over TCP, a real
// rc QP from cm connect, and messages built by hand with the wire codec — so a test can send
// what FileClient never would (requests before authentication, a wrong or replayed key, more
// messages than credits, requests past the limits) and see exactly what the server answers.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Access, connect, type CompletionQueue, type Device, type MemoryRegion, Opcode, openDevice, type QueuePair, WcOpcode, WcStatus } from '../../src/index.js';
import { connectionProof } from '../../src/files/auth.js';
import { readFields, writeFields } from '../../src/files/layout.js';
import { type Body, type FileHeader, HDR_LEN, STATUS_BLOCK_LEN, bodyLength, decodeBody, decodeHeader, encodeMessage } from '../../src/files/messages.js';
import { encodePipeFrame, type Negotiated, PipeClient, PipeReader } from '../../src/files/pipe.js';
import { FILE_AUTH_REQ, FILE_PIPE_WELCOME, FILE_SERVICE, FILE_SLOT_BYTES, FileFlag, FileOp, FilePipeType, FileProvider } from '../../src/wire/files-spec.js';
import { pollAll } from '../../src/core/sans-io.js';

export interface Got {
  hdr: FileHeader;
  body: Body | undefined;
  via: 'send' | 'imm';
}

/**
 * A control pipe from `from` that sends a wrong token proof: the Welcome's status, or 'closed' when
 * none came. Any 32 bytes: a proof made with a wrong token looks the same to the server. `open`
 * holds the socket while it is open.
 */
export function guessProof(port: number, from: string, open?: Set<net.Socket>): Promise<number | 'closed'> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
    open?.add(s);
    s.once('close', () => open?.delete(s));
    const reader = new PipeReader();
    let done = false;
    const end = (v: number | 'closed'): void => {
      if (done) return;
      done = true;
      s.destroy();
      resolve(v);
    };
    s.on('connect', () => s.write(encodePipeFrame(FilePipeType.Hello, new Uint8Array(randomBytes(32)))));
    s.on('data', (b: Buffer) => {
      for (const f of reader.push(new Uint8Array(b))) {
        if (f.type === FilePipeType.Challenge) s.write(encodePipeFrame(FilePipeType.Proof, new Uint8Array(randomBytes(32))));
        else if (f.type === FilePipeType.Welcome && f.body.length === FILE_PIPE_WELCOME.size) end(readFields(FILE_PIPE_WELCOME, f.body, 0).status);
      }
    });
    s.on('error', () => end('closed'));
    s.on('close', () => end('closed'));
  });
}

/** The pipe handshake alone: resolves with the negotiate result (or rejects with the refusal). */
export async function negotiate(port: number, token: string, transport: 'udp' | 'tcp' = 'tcp'): Promise<{ neg: Negotiated; pipe: net.Socket }> {
  const pipe = net.connect({ host: '127.0.0.1', port });
  const pc = new PipeClient({ token, providers: FileProvider[transport], random: (n) => new Uint8Array(randomBytes(n)) });
  const neg = await new Promise<Negotiated>((resolve, reject) => {
    const flush = (): void => {
      for (const e of pollAll(pc)) {
        if (e.kind === 'write') pipe.write(e.bytes);
        else if (e.kind === 'error') reject(Object.assign(new Error(e.message), { status: e.status }));
        else resolve(e.result);
      }
    };
    pipe.on('connect', flush);
    pipe.on('data', (b: Buffer) => {
      pc.handleReceive(new Uint8Array(b), 0);
      flush();
    });
    pipe.on('error', reject);
    pipe.on('close', () => reject(new Error('pipe closed')));
  });
  pipe.removeAllListeners('close');
  pipe.removeAllListeners('error');
  pipe.on('error', () => {});
  return { neg, pipe };
}

export class Raw {
  readonly neg: Negotiated;
  readonly pipe: net.Socket;
  readonly dev: Device;
  readonly qp: QueuePair;
  readonly cq: CompletionQueue;
  readonly recv: MemoryRegion;
  readonly status: MemoryRegion;
  readonly out: MemoryRegion;
  readonly sink: MemoryRegion;
  readonly got: Got[] = [];
  failed: string | undefined;
  #waiters: (() => void)[] = [];
  #nextOut = 0;
  readonly receives: number;

  private constructor(o: { neg: Negotiated; pipe: net.Socket; dev: Device; qp: QueuePair; cq: CompletionQueue; recv: MemoryRegion; status: MemoryRegion; out: MemoryRegion; sink: MemoryRegion; receives: number }) {
    this.neg = o.neg;
    this.pipe = o.pipe;
    this.dev = o.dev;
    this.qp = o.qp;
    this.cq = o.cq;
    this.recv = o.recv;
    this.status = o.status;
    this.out = o.out;
    this.sink = o.sink;
    this.receives = o.receives;
    void this.#loop();
  }

  static async open(port: number, token: string, transport: 'udp' | 'tcp' = 'tcp', receives = 32): Promise<Raw> {
    const { neg, pipe } = await negotiate(port, token, transport);
    return Raw.onto(neg, pipe, port, transport, receives);
  }

  /** A new RDMA connection for an existing negotiate result (to replay its key), from the address `from`. */
  static async onto(neg: Negotiated, pipe: net.Socket, port: number, transport: 'udp' | 'tcp' = 'tcp', receives = 32, from = '127.0.0.1'): Promise<Raw> {
    void port;
    const dev = await openDevice({ transport, host: from, port: 0 });
    const pd = dev.allocPd();
    const recv = pd.regMr(receives * 256, Access.LocalWrite);
    const status = pd.regMr(64 * FILE_SLOT_BYTES, Access.LocalWrite | Access.RemoteWrite);
    const out = pd.regMr(64 * 8192, Access.LocalWrite);
    const sink = pd.regMr(4 << 20, Access.LocalWrite | Access.RemoteWrite);
    const cq = dev.createCq({ depth: 1024 });
    const qp = await connect(dev, { transport, host: '127.0.0.1', port: transport === 'udp' ? neg.udpPort : neg.tcpPort }, {
      pd, service: FILE_SERVICE, qpInit: { sendCq: cq, recvCq: cq, maxSendWr: 256, maxRecvWr: receives, maxSge: 2, maxInline: 512, rnrRetry: 7 },
      setup: (q) => {
        for (let i = 0; i < receives; i++) q.postRecv({ wrId: i, sgList: [{ addr: recv.addr + i * 256, length: 256, lkey: recv.lkey }] });
      },
    });
    return new Raw({ neg, pipe, dev, qp, cq, recv, status, out, sink, receives });
  }

  async #loop(): Promise<void> {
    for (;;) {
      try {
        await this.cq.wait();
      } catch {
        return;
      }
      for (const wc of this.cq.poll(64)) {
        if (wc.status !== WcStatus.Success) {
          this.failed ??= `wc status ${wc.status} opcode ${wc.opcode}`;
          continue;
        }
        if (wc.opcode === WcOpcode.Recv || wc.opcode === WcOpcode.RecvRdmaWithImm) {
          const i = Number(wc.wrId);
          let b: Uint8Array;
          if (wc.opcode === WcOpcode.Recv) b = this.recv.buffer.slice(i * 256, i * 256 + wc.byteLen);
          else b = this.status.buffer.slice(wc.imm! * FILE_SLOT_BYTES, wc.imm! * FILE_SLOT_BYTES + STATUS_BLOCK_LEN);
          const h = decodeHeader(b);
          if (h.ok) {
            const d = decodeBody(h.value, b);
            this.got.push({ hdr: h.value, body: d.ok ? d.value : undefined, via: wc.opcode === WcOpcode.Recv ? 'send' : 'imm' });
          }
          try {
            this.qp.postRecv({ wrId: i, sgList: [{ addr: this.recv.addr + i * 256, length: 256, lkey: this.recv.lkey }] });
          } catch {
            // the QP is gone
          }
        }
      }
      for (const w of this.#waiters.splice(0)) w();
    }
  }

  /** Wait until `pred` holds over what arrived (or the connection failed), at most `ms`. */
  async until(pred: (got: Got[]) => boolean, ms = 10_000): Promise<boolean> {
    const end = Date.now() + ms;
    while (!pred(this.got)) {
      if (Date.now() > end) return false;
      await new Promise<void>((r) => {
        const t = setTimeout(r, 50);
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return true;
  }

  /** Post a Send of these bytes (and optional data) as they are. */
  send(bytes: Uint8Array, data?: Uint8Array): void {
    // A message longer than one 8 KiB slot takes as many as it needs (never wrapping), so the
    // next message cannot overwrite it while it waits to be sent.
    const n = Math.ceil((bytes.length + (data?.length ?? 0)) / 8192) || 1;
    if (n > 64) throw new Error(`raw send of ${bytes.length + (data?.length ?? 0)} bytes is larger than the out buffer`);
    if ((this.#nextOut % 64) + n > 64) this.#nextOut += 64 - (this.#nextOut % 64);
    const slot = this.#nextOut % 64;
    this.#nextOut += n;
    const at = slot * 8192;
    this.out.buffer.set(bytes, at);
    const sg = [{ addr: this.out.addr + at, length: bytes.length, lkey: this.out.lkey }];
    if (data) {
      this.out.buffer.set(data, at + bytes.length);
      sg[0]!.length += data.length;
    }
    this.qp.postSend({ wrId: slot, opcode: Opcode.Send, sgList: sg, signaled: false });
  }

  /** Encode and send a message. */
  message(h: Partial<FileHeader> & { opcode: number }, body: Body, data?: Uint8Array): void {
    const b = new Uint8Array(HDR_LEN + bodyLength(body));
    encodeMessage(b, { flags: 0, creditsRequested: 8, creditsGranted: 0, slot: 0, requestId: 0, info: 0, ...h }, body);
    this.send(b, data);
  }

  /** The AuthenticateRequest, with any part replaced (a wrong key, another session's key id …). */
  authenticate(o: { kAuth?: Uint8Array; keyId?: Uint8Array; resumeKey?: Uint8Array; grant?: number } = {}): void {
    const kAuth = o.kAuth ?? this.neg.kAuth;
    const keyId = o.keyId ?? this.neg.keyId;
    const resumeKey = o.resumeKey ?? this.neg.resumeKey;
    const nonce = new Uint8Array(randomBytes(16));
    const p = { statusAddr: this.status.addr, statusRkey: this.status.rkey, statusSlots: 64, maxReceiveSize: 256 };
    const tmp = new Uint8Array(FILE_AUTH_REQ.size);
    writeFields(FILE_AUTH_REQ, tmp, 0, p);
    const params = tmp.slice(FILE_AUTH_REQ.fields.statusAddr.offset);
    const mac = connectionProof(kAuth, resumeKey, keyId, nonce, params);
    this.message({ opcode: FileOp.AuthenticateRequest, creditsGranted: o.grant ?? this.receives - 1 }, { op: FileOp.AuthenticateRequest, resumeKey, keyId, nonce, mac, params, ...p });
  }

  /** A terminal StatusResponse arrived (the server closes the connection after it). */
  terminal(): Got | undefined {
    return this.got.find((g) => g.hdr.opcode === FileOp.StatusResponse && g.hdr.flags & 0x80);
  }

  async close(): Promise<void> {
    this.pipe.destroy();
    try {
      this.qp.destroy();
    } catch {
      // gone
    }
    await this.dev.close();
  }
}

/** A Completion's fields as the raw client sees them. */
export interface RawDone {
  status: number;
  aux: number;
  value: number;
}

/**
 * A Raw connection, authenticated, with `ask`: send one request (Interrupt completion) and wait
 * for its Completion (rejects after `ms`). Requests are numbered from 1, slots reused mod 60.
 */
export async function boundRaw(port: number, token: string, ms = 10_000): Promise<{ r: Raw; ask: (opcode: number, body: Body, data?: Uint8Array) => Promise<RawDone> }> {
  const r = await Raw.open(port, token);
  r.authenticate();
  if (!(await r.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse), ms))) {
    await r.close();
    throw new Error('the raw connection did not authenticate');
  }
  let id = 0;
  const ask = async (opcode: number, body: Body, data?: Uint8Array): Promise<RawDone> => {
    const rid = ++id;
    r.message({ opcode, flags: FileFlag.Interrupt, requestId: rid, slot: rid % 60, creditsGranted: 1 }, body, data);
    const mine = (x: Got): boolean => x.hdr.opcode === FileOp.Completion && x.hdr.requestId === rid;
    if (!(await r.until((g) => g.some(mine), ms))) throw new Error(`no Completion for request ${rid} within ${ms} ms`);
    return r.got.find(mine)!.body as unknown as RawDone;
  };
  return { r, ask };
}
