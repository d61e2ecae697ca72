// The channel message surface (docs/fuzzing.md "Message surfaces"): N seeded inputs, each
// drawn from its own mulberry32 stream (rng.ts), into
// - `wire`: the control-message decoder (decodeCtrl, with hostile windows), the immediate
//   (parseImm / dataImm must agree on every field) and packed records (unpackRecords: what it
//   returns must fill the slot exactly);
// - `codec`: decodeValue, the msgpack decoder every value message goes through — bombs (one
//   empty map per byte under an array32, deep nesting, counts and string lengths that lie,
//   extensions, __proto__ keys) and mutated encodings of ordinary values; most are at most a
//   slot's size, a few up to 4 MiB (a rendezvous message may be up to maxMessage);
// - `core`: a ChannelCore with a hostile peer (channel-core-fuzz.ts), one session after another.
// Live channels under a raw QP are the subject of test/channel/hostile.test.ts, not of this run.
import { DEFAULT_DECODE_LIMITS, decodeValue, encodeValue } from '../../src/channel/codec.js';
import { type Body, type CtrlMsg, CTRL_LEN, dataImm, decodeCtrl, encodeCtrl, packRecords, parseImm, unpackRecords, RECORD_HDR } from '../../src/channel/wire.js';
import { ChanType } from '../../src/wire/spec.js';
import { CORE_OPTIONS, CoreSession, TINY_RUNG_OPTIONS } from './channel-core-fuzz.js';
import { Gen, inputRand } from './rng.js';
import { Runner, type SurfaceReport, edgeU16, edgeU32, edgeU8, msgpackBomb, mutate } from './surface.js';

export interface SurfaceOptions {
  inputs: number;
  seed: number;
  log?: (line: string) => void;
  /** Step time judged a stall (default 50 ms). */
  stallMs?: number;
  /** Largest msgpack bomb the codec inputs draw (default 4 MiB). */
  bombMax?: number;
  /** Leave out input classes by name (the suite's short run skips findings not fixed yet). */
  skip?: string[];
}

const TYPES = Object.entries(ChanType).map(([name, code]) => ({ name, code }));
const typeName = (t: number): string => TYPES.find((x) => x.code === t)?.name ?? `type${t}`;

function randomBody(g: Gen): Body {
  switch (g.int(8)) {
    case 0: return {
      type: ChanType.Hello,
      hello: { version: edgeU8(g), ctrlSlots: edgeU8(g), window: edgeU16(g), maxEager: edgeU32(g), maxMessage: edgeU32(g), mboxRkey: edgeU32(g), mboxAddr: g.chance(0.2) ? 2 ** 53 - 1 : g.int(2 ** 48) },
      grant: { epoch: edgeU8(g), slots: edgeU16(g), slotSize: edgeU32(g), addr: g.chance(0.2) ? 2 ** 53 - 1 : g.int(2 ** 48), rkey: edgeU32(g), phase: edgeU8(g) },
    };
    case 1: return { type: ChanType.Credit };
    case 2: return { type: ChanType.Enlarge, need: edgeU32(g), epoch: edgeU8(g) };
    case 3: return { type: ChanType.Grant, grant: g.chance(0.2) ? undefined : { epoch: edgeU8(g), slots: edgeU16(g), slotSize: edgeU32(g), addr: g.int(2 ** 53), rkey: edgeU32(g), phase: edgeU8(g) } };
    case 4: return { type: ChanType.Switch, epoch: edgeU8(g), count: edgeU32(g) };
    case 5: return { type: ChanType.Offer, seq: edgeU16(g), length: edgeU32(g), rkey: edgeU32(g), addr: g.int(2 ** 53), value: g.chance(0.5) };
    case 6: return { type: ChanType.Done, seq: edgeU16(g) };
    default: return { type: ChanType.Close, next: edgeU16(g) };
  }
}

/** A wire input; returns the refusal (the decoder's error) or undefined. */
function wireInput(g: Gen, set: (b: Uint8Array, cls: string) => void): () => string | undefined {
  const k = g.int(10);
  if (k < 6) {
    const body = randomBody(g);
    const hdr = { flags: edgeU8(g), ctrlCredits: edgeU8(g), epoch: edgeU8(g), slotCredits: edgeU16(g), consumed: edgeU16(g) };
    let b = encodeCtrl({ ...body, hdr } as CtrlMsg);
    let cls = `ctrl/${typeName(body.type)}`;
    if (k >= 2) {
      b = mutate(g, b);
      cls += '/mutated';
    } else if (k === 1) {
      b = g.bytes(g.pick([0, 1, 7, 8, 9, ...CTRL_LEN.values()]));
      if (b.length) b[0] = g.chance(0.8) ? 1 + g.int(8) : g.int(256);
      cls = 'ctrl/random';
    }
    // A window into a larger buffer, or one that is not a window at all.
    const w = g.int(10);
    const pad = w < 7 ? 0 : 1 + g.int(8);
    const buf = new Uint8Array(b.length + 2 * pad);
    buf.set(b, pad);
    const off = w === 9 ? g.pick([-1, buf.length + 1, 0.5, NaN]) : pad;
    const end = w === 8 ? g.pick([pad - 1, buf.length + 1, Infinity, pad + b.length]) : pad + b.length;
    set(buf, cls + (w >= 8 ? '/bad-window' : ''));
    return () => {
      const r = decodeCtrl(buf, off, end);
      if (!r.ok) return `decodeCtrl ${r.error}`;
      if (w < 8 && CTRL_LEN.get(r.msg.type) !== end - off) throw new Error(`decodeCtrl accepted ${end - off} bytes as a ${typeName(r.msg.type)}`);
      return undefined;
    };
  }
  if (k < 7) {
    const epoch = edgeU8(g);
    const slot = edgeU8(g);
    const seq = edgeU16(g);
    const value = g.chance(0.5);
    const packed = g.chance(0.5);
    const raw = g.u32();
    set(Uint8Array.from([raw >>> 24, (raw >>> 16) & 0xff, (raw >>> 8) & 0xff, raw & 0xff]), 'imm');
    return () => {
      parseImm(raw);
      const f = parseImm(dataImm(epoch, value, slot, seq, packed));
      const back = dataImm(f.epoch, f.value, f.slot, f.seq, f.packed);
      if (f.ctrl || back !== dataImm(epoch, value, slot, seq, packed)) throw new Error(`dataImm/parseImm disagree on epoch ${epoch} slot ${slot} seq ${seq}`);
      return undefined;
    };
  }
  const n = 1 + g.int(8);
  let b = packRecords(Array.from({ length: n }, () => ({ bytes: g.bytes(g.pick([0, 1, 5, g.int(200)])), value: g.chance(0.5) })));
  const mutated = g.chance(0.7);
  if (mutated) b = mutate(g, b);
  set(b, mutated ? 'records/mutated' : 'records');
  return () => {
    const r = unpackRecords(b);
    if (typeof r === 'string') return `unpackRecords ${r}`;
    let sum = 0;
    for (const x of r) sum += RECORD_HDR + x.bytes.length;
    if (sum !== b.length) throw new Error(`unpackRecords returned records of ${sum} bytes from a ${b.length}-byte slot`);
    return undefined;
  };
}

function randomValue(g: Gen, depth = 0): unknown {
  switch (g.int(depth > 3 ? 6 : 9)) {
    case 0: return g.pick([0, 1, -1, 2 ** 31, 2 ** 32 - 1, 2 ** 53 - 1, -(2 ** 63), 0.5, NaN, Infinity]);
    case 1: return 'x'.repeat(g.pick([0, 1, 31, 32, 255, 256, 65535, 65536]) % 70_000);
    case 2: return g.bytes(g.int(64));
    case 3: return g.chance(0.5);
    case 4: return null;
    case 5: return BigInt(g.u32()) << 32n;
    case 6: return Array.from({ length: g.int(6) }, () => randomValue(g, depth + 1));
    case 7: return Object.fromEntries(Array.from({ length: g.int(5) }, (_, i) => [`k${i}`, randomValue(g, depth + 1)]));
    default: return new Map([[randomValue(g, depth + 1), randomValue(g, depth + 1)]]);
  }
}

function codecInput(g: Gen, bombMax: number, set: (b: Uint8Array, cls: string) => void): () => string | undefined {
  let b: Uint8Array;
  let cls: string;
  if (g.chance(0.6)) {
    // Most bombs fit a slot; one in 5000 is up to bombMax (a rendezvous message can be).
    const max = g.chance(0.0002) ? 64 * 1024 + g.int(bombMax) : g.pick([1, 16, 256, 4096, 32768]);
    const x = msgpackBomb(g, max);
    b = x.bytes;
    cls = `bomb/${x.cls}${b.length > 32768 ? '/large' : ''}`;
  } else {
    let v: Uint8Array;
    try {
      v = encodeValue(randomValue(g));
    } catch {
      v = encodeValue(null);
    }
    const mutated = g.chance(0.7);
    b = mutated ? mutate(g, v) : v;
    cls = mutated ? 'value/mutated' : 'value';
  }
  set(b, cls);
  return () => {
    const r = decodeValue(b, DEFAULT_DECODE_LIMITS);
    if (({} as Record<string, unknown>).polluted !== undefined) throw new Error('a decoded value polluted Object.prototype');
    return r.ok ? undefined : `decodeValue ${r.error.replace(/\d+/g, 'N').slice(0, 80)}`;
  };
}

export async function runChannelCampaign(o: SurfaceOptions): Promise<SurfaceReport> {
  const run = new Runner('channel', o.seed, o.stallMs);
  const bombMax = o.bombMax ?? 4 << 20;
  const every = Math.max(1, Math.floor(o.inputs / 10));
  let session: CoreSession | undefined;
  let b: Uint8Array = new Uint8Array(0);
  let cls = '';
  const set = (x: Uint8Array, c: string): void => {
    b = x;
    cls = c;
  };
  for (let i = 0; i < o.inputs; i++) {
    const g = new Gen(inputRand(o.seed, i));
    const k = g.int(100);
    if (k < 25) {
      const fn = wireInput(g, set);
      run.step('wire', cls, i, () => b, fn);
    } else if (k < 40) {
      const fn = codecInput(g, bombMax, set);
      run.step('codec', cls, i, () => b, fn);
    } else {
      let fresh = false;
      if (!session || session.torn || session.steps > 2000) {
        if (session) {
          run.count('coreSessions');
          if (session.failure) run.refuse(`core session ended: ${session.failure.replace(/\d+/g, 'N').slice(0, 90)}`);
          if (session.opened) run.count('coreSessionsOpened');
        }
        // Each session's generator is its first input's: the whole run replays from (seed, inputs).
        try {
          const tiny = g.chance(0.005) && !o.skip?.includes('tiny-rung');
          session = new CoreSession(g, tiny ? TINY_RUNG_OPTIONS : g.pick(CORE_OPTIONS));
        } catch (e) {
          run.crash('core', 'new session', i, e);
          session = undefined;
          continue;
        }
        fresh = true;
      }
      const s = session;
      // Later inputs of a session draw from their own stream too.
      s.g = g;
      const first = fresh && g.chance(0.9);
      let out: string | undefined;
      run.step('core', () => s.cls, i, () => s.last, () => {
        out = first ? s.hello() : s.step();
        return out;
      });
      // The class is known once the step chose it; fold it into the counts by class.
      run.count(`core:${s.cls.split('/').slice(0, 2).join('/')}`);
      if (out === 'session over') session = undefined;
    }
    if ((i + 1) % every === 0) o.log?.(`channel: ${i + 1}/${o.inputs} inputs, ${run.crashes} crashes, worst step ${run.worst.ms.toFixed(1)} ms (${run.worst.target} ${run.worst.cls})`);
  }
  return run.finish();
}
