// Properties of the file service's parsers and state machines under arbitrary input (fast-check):
// decoders never throw and agree with the encoder; the control pipe never throws and closes on
// garbage; a server connection fed random messages (each paid with a credit) never throws,
// never over-grants, counts them, and still serves a well-formed request afterwards.
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClientConnection } from '../../src/files/client-core.js';
import { decodeDirEntries, encodeDirEntries } from '../../src/files/dirents.js';
import { type Body, HDR_LEN, bodyLength, decodeBody, decodeHeader, encodeMessage } from '../../src/files/messages.js';
import { PipeReader, PipeServer, newPipeCounters } from '../../src/files/pipe.js';
import { SessionTable } from '../../src/files/sessions.js';
import { FileAccess, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { Harness } from './harness.js';
import { pollAll } from '../../src/core/sans-io.js';

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const u16 = fc.integer({ min: 0, max: 0xffff });
const safe = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const path = fc.string({ minLength: 1, maxLength: 200 });

const body: fc.Arbitrary<Body> = fc.oneof(
  fc.record({ op: fc.constant(FileOp.Read), fileId: u32, length: u32, offset: safe, sinkAddr: safe, sinkRkey: u32 }),
  fc.record({ op: fc.constant(FileOp.RegisterFile), access: u32, mode: u32, path }),
  fc.record({ op: fc.constant(FileOp.List), cookie: u32, sinkLength: u32, sinkAddr: safe, sinkRkey: u32, path: fc.string({ maxLength: 100 }) }),
  fc.record({ op: fc.constant(FileOp.Close), fileId: u32, discard: fc.integer({ min: 0, max: 1 }) }),
  fc.record({ op: fc.constant(FileOp.ReadV), fileId: u32, sinkAddr: safe, sinkRkey: u32, entries: fc.array(fc.record({ offset: safe, sinkAddr: safe, length: u32 }), { minLength: 1, maxLength: 20 }) }),
  fc.record({ op: fc.constant(FileOp.StatusResponse), status: u32, aux: u32, value: safe }),
  fc.record({ op: fc.constant(FileOp.Completion), status: u32, aux: u32, value: safe, seal: u32 }),
) as fc.Arbitrary<Body>;

describe('file-service codecs', () => {
  it('decodeHeader / decodeBody never throw on arbitrary bytes', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 400 }), (b) => {
      const h = decodeHeader(b);
      if (h.ok) decodeBody(h.value, b);
    }), { numRuns: 5000 });
  });

  it('what the encoder writes, the decoder reads back (fixed parts and tails)', () => {
    fc.assert(fc.property(body, u16, u16, u32, (bd, cr, cg, id) => {
      const b = new Uint8Array(HDR_LEN + bodyLength(bd));
      encodeMessage(b, { opcode: bd.op, flags: 0, creditsRequested: cr, creditsGranted: cg, slot: 3, requestId: id, info: 0 }, bd);
      const h = decodeHeader(b);
      expect(h.ok).toBe(true);
      if (!h.ok) return;
      expect(h.value).toMatchObject({ opcode: bd.op, creditsRequested: cr, creditsGranted: cg, requestId: id });
      const d = decodeBody(h.value, b);
      expect(d.ok, d.ok ? '' : d.error).toBe(true);
      if (d.ok) expect(d.value).toEqual(bd);
    }), { numRuns: 2000 });
  });

  it('a message cut short or lengthened by a byte is refused, never misread', () => {
    fc.assert(fc.property(body, fc.boolean(), (bd, longer) => {
      const b = new Uint8Array(HDR_LEN + bodyLength(bd));
      encodeMessage(b, { opcode: bd.op, flags: 0, creditsRequested: 1, creditsGranted: 0, slot: 0, requestId: 1, info: 0 }, bd);
      const m = longer ? Uint8Array.from([...b, 0]) : b.subarray(0, b.length - 1);
      const h = decodeHeader(m);
      if (h.ok) expect(decodeBody(h.value, m).ok).toBe(false);
    }), { numRuns: 2000 });
  });

  it('directory pages round-trip, and arbitrary pages decode or are refused without throwing', () => {
    fc.assert(fc.property(fc.array(fc.record({
      name: fc.string({ minLength: 1, maxLength: 60 }), type: fc.constantFrom('file' as const, 'directory' as const, 'symlink' as const, 'other' as const),
      mode: fc.integer({ min: 0, max: 0o7777 }), size: safe, mtimeMs: safe,
    }), { maxLength: 30 }), (entries) => {
      const out = new Uint8Array(64 * 1024);
      const [n, count] = encodeDirEntries(out, entries, 0);
      expect(count).toBe(entries.length);
      expect(decodeDirEntries(out.subarray(0, n))).toEqual(entries);
    }), { numRuns: 500 });
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (b) => {
      decodeDirEntries(b);
    }), { numRuns: 3000 });
  });
});

describe('the control pipe under garbage', () => {
  it('PipeReader and PipeServer never throw; garbage closes the pipe, counted', () => {
    fc.assert(fc.property(fc.array(fc.uint8Array({ maxLength: 80 }), { maxLength: 10 }), (chunks) => {
      const counters = newPipeCounters();
      const s = new PipeServer({
        token: 't', sessions: new SessionTable({}, (n) => new Uint8Array(randomBytes(n))), offer: { providers: 3, udpPort: 1, tcpPort: 2, inprocId: '' },
        random: (n) => new Uint8Array(randomBytes(n)), counters, now: 0,
      });
      for (const c of chunks) s.handleReceive(c, 1);
      const acts = pollAll(s);
      if (s.state === 'closed') expect(acts.at(-1)?.kind).toBe('close');
      expect(s.session).toBeUndefined(); // garbage never proves the token
      new PipeReader().push(Uint8Array.from(chunks.flatMap((c) => [...c])));
    }), { numRuns: 3000 });
  });
});

describe('a server connection fed random messages', () => {
  it('never throws nor over-grants, counts what it refuses, and serves a good request afterwards', () => {
    fc.assert(fc.property(fc.array(fc.oneof(fc.uint8Array({ maxLength: 120 }), body.map((bd) => {
      const b = new Uint8Array(HDR_LEN + bodyLength(bd));
      encodeMessage(b, { opcode: bd.op, flags: 1, creditsRequested: 4, creditsGranted: 0, slot: 5, requestId: 77, info: 0 }, bd);
      return b;
    })), { minLength: 1, maxLength: 12 }), fc.integer({ min: 1, max: 1000 }), (msgs, seed) => {
      const h = new Harness({ seed, files: { f: new Uint8Array(64).fill(5) }, limits: { credits: 4 } });
      h.authenticate();
      expect(h.ready).toBe(true);
      for (const m of msgs) {
        // Each hostile message pays its credit, as a client that respects credits but not formats.
        while (h.client.credits.send === 0 && h.step());
        if (h.client.credits.send === 0 || h.terminated) break;
        h.client.credits.send--;
        h.injectC2S(m);
        h.pump();
      }
      expect(h.violations).toEqual([]);
      if (h.terminated || h.failed) return;
      const d = h.run({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' });
      expect(d.status).toBe(FileStatus.Success);
    }), { numRuns: 300 });
  });
});

describe('a client connection fed random messages from a hostile server', () => {
  it('never throws; a message without a credit fails the connection with ERR_FILE_PROTOCOL', () => {
    fc.assert(fc.property(fc.array(fc.tuple(fc.uint8Array({ maxLength: 80 }), fc.integer({ min: -1, max: 8 })), { maxLength: 20 }), (msgs) => {
      const c = new ClientConnection({ credits: 4, statusSlots: 8, receiveSize: 128 });
      c.start({ resumeKey: new Uint8Array(24), keyId: new Uint8Array(16), kAuth: new Uint8Array(32), nonce: new Uint8Array(16), statusAddr: 0, statusRkey: 1 });
      for (const [m, slot] of msgs) {
        if (slot < 0) c.handleReceive(m, 0);
        else c.handleStatusBlock(slot, m, slot % 2 === 0, 0);
      }
      const failed = pollAll(c).find((a) => a.kind === 'failed');
      if (failed && failed.kind === 'failed') expect(failed.code).toMatch(/^ERR_FILE_/);
    }), { numRuns: 3000 });
  });
});
