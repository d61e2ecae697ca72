// The file-service message surface (docs/fuzzing.md "Message surfaces"): N seeded inputs into
// - `messages`: decodeHeader / decodeBody (src/files/messages.ts) on encoded messages of every
//   opcode with fields at their edges, then mutated, and on raw bytes;
// - `pipe`: the control pipe's server core (files-cores.ts PipeSession), one pipe after another;
// - `conn`: the RDMA connection's server core (files-cores.ts ConnSession), one after another;
// - `dedup-auth`: the dedup channel's first message (src/files/dedup.ts serveDedupChannel, on a
//   model channel): the bytes a peer sends are decoded as the channel would (decodeValue) and
//   handed over — AUTH objects with each field of the wrong type, length or value, paths at
//   and past the limits, msgpack bombs, and valid proofs for a key the session minted (then the
//   path checks and a jail that finds nothing).
import { randomBytes } from 'node:crypto';
import type { Channel } from '../../src/channel/channel.js';
import { DEFAULT_DECODE_LIMITS, decodeValue, encodeValue } from '../../src/channel/codec.js';
import { authKey, sessionKey } from '../../src/files/auth.js';
import { type DedupServerContext, dedupAuth, serveDedupChannel } from '../../src/files/dedup.js';
import type { Jail } from '../../src/files/jail.js';
import { type Body, HDR_LEN, bodyLength, decodeBody, decodeHeader, encodeMessage } from '../../src/files/messages.js';
import { SessionTable } from '../../src/files/sessions.js';
import { FILE_OPCODES, FileOp, FileStatus } from '../../src/wire/spec.js';
import type { SurfaceOptions } from './channel-campaign.js';
import { ConnSession, PipeSession, hostilePath } from './files-cores.js';
import { Gen, inputRand } from './rng.js';
import { Runner, type SurfaceReport, edgeU16, edgeU32, edgeU8, msgpackBomb, mutate } from './surface.js';

const random = (n: number): Uint8Array => new Uint8Array(randomBytes(n));

function anyBody(g: Gen): Body {
  const safe = (): number => g.pick([0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, g.int(2 ** 40)]);
  const u32 = (): number => edgeU32(g);
  const path = (): string => new TextDecoder().decode(hostilePath(g)).slice(0, 4096);
  switch (g.int(13)) {
    case 0: return { op: FileOp.Read, fileId: u32(), length: u32(), offset: safe(), sinkAddr: safe(), sinkRkey: u32() };
    case 1: return { op: FileOp.RegisterFile, access: u32(), mode: u32(), path: path() || 'f' };
    case 2: return { op: FileOp.List, cookie: u32(), sinkLength: u32(), sinkAddr: safe(), sinkRkey: u32(), path: path() };
    case 3: return { op: FileOp.Close, fileId: u32(), discard: g.int(2) };
    case 4: return { op: FileOp.ReadV, fileId: u32(), sinkAddr: safe(), sinkRkey: u32(), entries: Array.from({ length: 1 + g.int(g.chance(0.1) ? 300 : 8) }, () => ({ offset: safe(), sinkAddr: safe(), length: u32() })) };
    case 5: return { op: FileOp.WriteV, fileId: u32(), entries: Array.from({ length: 1 + g.int(8) }, () => ({ offset: safe(), length: g.int(64) })), dataOff: 0, dataLen: 0 };
    case 6: return { op: FileOp.Write, fileId: u32(), offset: safe(), length: g.int(64), dataOff: 0 };
    case 7: return { op: FileOp.StatusResponse, status: u32(), aux: u32(), value: safe() };
    case 8: return { op: FileOp.Completion, status: u32(), aux: u32(), value: safe(), seal: u32() };
    case 9: return {
      op: FileOp.AuthenticateRequest, resumeKey: g.bytes(24), keyId: g.bytes(16), nonce: g.bytes(16), mac: g.bytes(32), params: new Uint8Array(0),
      statusAddr: safe(), statusRkey: u32(), statusSlots: edgeU16(g), maxReceiveSize: u32(),
    };
    default: return { op: g.pick([FileOp.Cancel, FileOp.Credit, FileOp.DeltaCredit, FileOp.InterruptRequest]) } as Body;
  }
}

function messageInput(g: Gen, set: (b: Uint8Array, cls: string) => void): () => string | undefined {
  let b: Uint8Array;
  let cls: string;
  if (g.chance(0.85)) {
    const body = anyBody(g);
    const name = FILE_OPCODES.find((o) => o.code === body.op)?.name ?? String(body.op);
    try {
      const extra = body.op === FileOp.Write ? (body as { length: number }).length : body.op === FileOp.WriteV ? (body as { entries: { length: number }[] }).entries.reduce((s, e) => s + e.length, 0) : 0;
      b = new Uint8Array(HDR_LEN + bodyLength(body) + extra);
      encodeMessage(b, { opcode: body.op, flags: edgeU8(g), creditsRequested: edgeU16(g), creditsGranted: edgeU16(g), slot: edgeU16(g), requestId: edgeU32(g), info: edgeU32(g) }, body);
      cls = name;
    } catch {
      b = g.bytes(HDR_LEN + g.int(64));
      cls = `${name}/unencodable`;
    }
    if (g.chance(0.6)) {
      b = mutate(g, b);
      cls += '/mutated';
    }
  } else {
    b = g.bytes(g.pick([0, 1, HDR_LEN - 1, HDR_LEN, HDR_LEN + 1, g.int(300)]));
    if (b.length) b[0] = g.int(20);
    cls = 'raw';
  }
  set(b, cls);
  return () => {
    const h = decodeHeader(b);
    if (!h.ok) return `decodeHeader ${h.error}`;
    const d = decodeBody(h.value, b);
    return d.ok ? undefined : `decodeBody ${d.error}`;
  };
}

/** A model channel for serveDedupChannel: its first message is `value`, its replies are kept. */
function modelChannel(value: unknown): { ch: Channel; replies: unknown[]; closed: () => boolean } {
  const replies: unknown[] = [];
  let closed = false;
  let first = true;
  const ch = {
    next: () => {
      const r = first ? { done: false, value } : { done: true, value: undefined };
      first = false;
      return Promise.resolve(r);
    },
    send: (v: unknown) => {
      replies.push(v);
      return Promise.resolve();
    },
    close: () => {
      closed = true;
      return Promise.resolve();
    },
    dedupBasis: () => undefined,
    authorize: () => undefined,
    pd: {},
  } as unknown as Channel;
  return { ch, replies, closed: () => closed };
}

const noJail = { open: () => Promise.resolve({ status: FileStatus.NotFound, why: 'the model jail holds nothing' }) } as unknown as Jail;

/** The value a dedup AUTH input decodes to, with its class and the bytes the peer sent. */
function dedupValue(g: Gen, sessions: SessionTable): { cls: string; bytes: Uint8Array } {
  const k = g.int(10);
  if (k < 2) {
    const x = msgpackBomb(g, g.pick([16, 256, 4096, 32768]));
    return { cls: `bomb/${x.cls}`, bytes: x.bytes };
  }
  // A real AUTH (a key minted in a live session), then one field made wrong in most.
  const s = sessions.open(sessionKey('t', random(32), random(32)));
  const keyId = s && sessions.mintKey(s, performance.now());
  const neg = s && keyId ? { resumeKey: s.resumeKey, keyId, kAuth: random(32) } : { resumeKey: random(24), keyId: random(16), kAuth: random(32) };
  if (s && keyId && g.chance(0.9)) neg.kAuth = authKey(s.kSession, keyId);
  const path = new TextDecoder().decode(hostilePath(g));
  const a: Record<string, unknown> = { ...dedupAuth(neg, g.chance(0.5) ? 'put' : 'get', path, g.chance(0.5)) };
  let cls = 'auth';
  if (k >= 5) {
    const field = g.pick(['resumeKey', 'keyId', 'nonce', 'mac', 'op', 'path', 'fsync']);
    cls = `auth/${field}`;
    a[field] = g.pick<unknown>([
      undefined, null, 0, -1, 2 ** 53, 'x', '', true, [], {}, new Uint8Array(0), g.bytes(g.pick([15, 16, 17, 23, 24, 25, 31, 32, 33])),
      'a'.repeat(g.pick([4096, 4097, 65536])), { length: 24 }, [1, 2, 3], new Map([[1, 2]]),
    ]);
  }
  if (k === 2) {
    cls = 'auth/extra-keys';
    Object.assign(a, { __proto__: { op: 'put' }, extra: 'x'.repeat(g.int(1000)), [g.pick(['constructor', 'toString', 'hasOwnProperty'])]: 1 });
  }
  let bytes: Uint8Array;
  try {
    bytes = encodeValue(a);
  } catch {
    bytes = encodeValue(null);
  }
  if (g.chance(0.1)) {
    bytes = mutate(g, bytes);
    cls += '/mutated';
  }
  return { cls, bytes };
}

export async function runFilesCampaign(o: SurfaceOptions): Promise<SurfaceReport> {
  const run = new Runner('files', o.seed, o.stallMs);
  const every = Math.max(1, Math.floor(o.inputs / 10));
  let pipe: PipeSession | undefined;
  let conn: ConnSession | undefined;
  let dedupSessions = new SessionTable({ maxSessions: 1 << 20, maxPendingKeys: 1 << 20 }, random);
  // Every counter the server context names reads 0 until counted (the set grows with the server).
  const counts: Record<string, number> = {};
  const dedupCounters = new Proxy(counts, { get: (t, k) => (typeof k === 'string' ? t[k] ?? 0 : undefined) }) as unknown as DedupServerContext['counters'];
  let b: Uint8Array = new Uint8Array(0);
  let cls = '';
  const set = (x: Uint8Array, c: string): void => {
    b = x;
    cls = c;
  };
  for (let i = 0; i < o.inputs; i++) {
    const g = new Gen(inputRand(o.seed, i));
    const k = g.int(100);
    if (k < 30) {
      const fn = messageInput(g, set);
      run.step('messages', cls, i, () => b, fn);
    } else if (k < 50) {
      if (!pipe || pipe.closed || g.chance(0.002)) {
        if (pipe) run.count('pipes');
        pipe = new PipeSession(g);
      }
      const p = pipe;
      p.g = g;
      run.step('pipe', () => p.cls, i, () => p.last, () => p.step());
    } else if (k < 92) {
      let fresh = false;
      if (!conn || conn.released || g.chance(0.0005)) {
        if (conn) {
          run.count('connections');
          if (conn.authenticated) run.count('connectionsAuthenticated');
        }
        conn = new ConnSession(g);
        fresh = true;
      }
      const c = conn;
      c.g = g;
      run.step('conn', () => c.cls, i, () => c.last, () => (fresh && g.chance(0.95) ? c.authenticate() : c.step()));
    } else {
      // Each input opens a session of its own: a fresh table now and then keeps it bounded.
      if (dedupSessions.size > 10_000) dedupSessions = new SessionTable({ maxSessions: 1 << 20, maxPendingKeys: 1 << 20 }, random);
      const x = dedupValue(g, dedupSessions);
      await run.stepAsync('dedup-auth', x.cls, i, () => x.bytes, async () => {
        const v = decodeValue(x.bytes, DEFAULT_DECODE_LIMITS);
        if (!v.ok) return `decodeValue ${v.error.replace(/\d+/g, 'N').slice(0, 60)} (the channel fails before the AUTH parse)`;
        const m = modelChannel(v.value);
        // The fields the server's listener passes (pending: the channels still waiting for their AUTH).
        const ctx = { sessions: dedupSessions, jail: noJail, readOnly: true, fsync: false, maxBytes: 1 << 20, counters: dedupCounters, pending: new Map(), maxPending: 64 } as unknown as DedupServerContext;
        await serveDedupChannel(m.ch, ctx);
        if (m.replies.length !== 1 || !m.closed()) throw new Error(`serveDedupChannel answered ${m.replies.length} times, closed ${m.closed()}`);
        const r = m.replies[0] as { ok: boolean; why?: string };
        return r.ok ? undefined : `${(r.why ?? '').replace(/\d+/g, 'N').slice(0, 80)}`;
      });
    }
    if ((i + 1) % every === 0) o.log?.(`files: ${i + 1}/${o.inputs} inputs, ${run.crashes} crashes, worst step ${run.worst.ms.toFixed(1)} ms (${run.worst.target} ${run.worst.cls})`);
  }
  Object.assign(run.extra, counts);
  return run.finish();
}
