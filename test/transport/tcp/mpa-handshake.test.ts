// MPA Request/Reply bytes written out from the RFC 5044 §7.1 / RFC 6581 §5 diagrams, and the
// handshake state machine driven directly (no sockets, no sleeps: the clock is a number).
import { describe, expect, it } from 'vitest';
import { MpaHandshake, type MpaConfig, type MpaEvent } from '../../../src/transport/tcp/mpa-handshake.js';
import { connectProof, proves } from '../../../src/transport/tcp/connect-proof.js';
import { decodeSabrePd, encodeSabrePd } from '../../../src/transport/tcp/private-data.js';

const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));
const REQ_KEY = ascii('MPA ID Req Frame'); // 4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65
const REP_KEY = ascii('MPA ID Rep Frame'); // ... 65 70 ...

function sent(evs: MpaEvent[]): Uint8Array {
  const s = evs.find((e) => e.type === 'send');
  if (!s || s.type !== 'send') throw new Error('nothing sent');
  return s.bytes;
}

function pair(ini: Partial<MpaConfig> = {}, resp: Partial<MpaConfig> = {}) {
  const a = new MpaHandshake({ role: 'initiator', ...ini });
  const b = new MpaHandshake({ role: 'responder', ...resp });
  b.start(0);
  const req = sent(a.start(0));
  const evB = b.receive(req, 1);
  return { a, b, req, evB };
}

describe('MPA frame bytes (hand-derived)', () => {
  it('revision 2 request: key, M=0 C=1 R=0 H=1 -> 0x50, Rev 2, PD_Length, IRD/ORD word, ULP data', () => {
    const a = new MpaHandshake({ role: 'initiator', ird: 16, ord: 8, privateData: Uint8Array.of(0xde, 0xad) });
    const bytes = sent(a.start(0));
    expect([...bytes]).toEqual([
      ...REQ_KEY,
      0x50, 0x02, // |M|C|R|H|Res| = 0 1 0 1 0000, Rev = 2
      0x00, 0x06, // PD_Length = 4 (IRD/ORD) + 2
      0x00, 0x10, // P2P=0, ZeroLenRTR=0, IRD=16
      0x00, 0x08, // WriteRTR=0, ReadRTR=0, ORD=8
      0xde, 0xad,
    ]);
  });

  it('revision 1 request with markers asked and CRC off: 0x80, Rev 1, private data at offset 0', () => {
    const a = new MpaHandshake({ role: 'initiator', revision: 1, crc: false, markers: true, privateData: Uint8Array.of(1, 2, 3) });
    expect([...sent(a.start(0))]).toEqual([...REQ_KEY, 0x80, 0x01, 0x00, 0x03, 1, 2, 3]);
  });

  it('revision 2 reply: Rep key, C echoed, H, IRD/ORD negotiated (ORD <= peer IRD)', () => {
    const { b, evB } = pair({ ird: 4, ord: 2 }, { ird: 32, ord: 32 });
    expect(evB).toEqual([expect.objectContaining({ type: 'request' })]);
    const evs = b.accept(Uint8Array.of(0x99));
    expect([...sent(evs)]).toEqual([...REP_KEY, 0x50, 0x02, 0x00, 0x05, 0x00, 0x20, 0x00, 0x04, 0x99]);
    const est = evs.find((e) => e.type === 'established');
    expect(est).toMatchObject({ result: { role: 'responder', ird: 32, ord: 4, crc: true, enhanced: true, rtr: 'none' } });
  });

  it('revision 1 reply to a revision 1 request: no IRD/ORD word', () => {
    const { b } = pair({ revision: 1 });
    expect([...sent(b.accept(Uint8Array.of(7)))]).toEqual([...REP_KEY, 0x40, 0x01, 0x00, 0x01, 7]);
  });

  it('sabre private data: length-prefixed block after the IRD/ORD word', () => {
    const block = encodeSabrePd({ kind: 'connect', initiatorQpn: 0x0102, responderQpn: 0x0a0b0c0d, nonce: 0xcafebabe });
    expect([...block]).toEqual([0x00, 0x10, 0x01, 0x01, 0x00, 0x00, 0, 0, 1, 2, 0x0a, 0x0b, 0x0c, 0x0d, 0xca, 0xfe, 0xba, 0xbe]);
    expect(decodeSabrePd(block)).toEqual({ kind: 'connect', initiatorQpn: 0x102, responderQpn: 0x0a0b0c0d, nonce: 0xcafebabe });
    expect(decodeSabrePd(Uint8Array.of(0, 1, 2))).toBeUndefined();
  });

  it('sabre private data of an rdma_cm-style connect: the service, then the application\'s bytes; a block that lies about its length is not sabre\'s', () => {
    const block = encodeSabrePd({ kind: 'connect', initiatorQpn: 3, responderQpn: 0, nonce: 0x01020304, service: 0x0900, userData: Uint8Array.of(0xaa, 0xbb) });
    expect([...block]).toEqual([0x00, 0x16, 0x01, 0x01, 0x00, 0x00, 0, 0, 0, 3, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0x09, 0x00, 0xaa, 0xbb]);
    expect(decodeSabrePd(block)).toEqual({ kind: 'connect', initiatorQpn: 3, responderQpn: 0, nonce: 0x01020304, service: 0x900, userData: Uint8Array.of(0xaa, 0xbb) });
    // Trailing bytes past blockLen belong to nobody: the application's bytes end with the block.
    expect(decodeSabrePd(Uint8Array.of(...block, 0xcc))).toMatchObject({ userData: Uint8Array.of(0xaa, 0xbb) });
    expect(decodeSabrePd(Uint8Array.of(0x00, 0x17, ...block.subarray(2)))).toBeUndefined();
    expect(decodeSabrePd(Uint8Array.of(0x00, 0x0c, ...block.subarray(2, 14)))).toBeUndefined();
  });

  it('sabre private data of a QP-to-QP connect with a secret: flags.Proof, then the 16-byte proof, which binds role, QPNs and nonce', () => {
    const secret = new Uint8Array(32).fill(7);
    const proof = connectProof(secret, 'request', 3, 9, 0x01020304);
    const block = encodeSabrePd({ kind: 'connect', initiatorQpn: 3, responderQpn: 9, nonce: 0x01020304, proof });
    expect([...block.subarray(0, 18)]).toEqual([0x00, 0x20, 0x01, 0x01, 0x00, 0x02, 0, 0, 0, 3, 0, 0, 0, 9, 1, 2, 3, 4]);
    expect([...block.subarray(18)]).toEqual([...proof]);
    const got = decodeSabrePd(block);
    expect(got).toEqual({ kind: 'connect', initiatorQpn: 3, responderQpn: 9, nonce: 0x01020304, proof });
    expect(proves(secret, 'request', got as { initiatorQpn: number; responderQpn: number; nonce: number; proof: Uint8Array })).toBe(true);
    // Another role, QPN, nonce or secret does not pass.
    expect(proves(secret, 'reply', { initiatorQpn: 3, responderQpn: 9, nonce: 0x01020304, proof })).toBe(false);
    expect(proves(secret, 'request', { initiatorQpn: 4, responderQpn: 9, nonce: 0x01020304, proof })).toBe(false);
    expect(proves(secret, 'request', { initiatorQpn: 3, responderQpn: 9, nonce: 0x01020305, proof })).toBe(false);
    expect(proves(new Uint8Array(32).fill(8), 'request', { initiatorQpn: 3, responderQpn: 9, nonce: 0x01020304, proof })).toBe(false);
    expect(proves(secret, 'request', { initiatorQpn: 3, responderQpn: 9, nonce: 0x01020304 })).toBe(false);
    // The flag with a body of another length is not sabre's; a proof does not go with a service.
    expect(decodeSabrePd(Uint8Array.of(0x00, 0x1f, ...block.subarray(2, 33)))).toBeUndefined();
    expect(() => encodeSabrePd({ kind: 'connect', initiatorQpn: 3, responderQpn: 0, nonce: 1, proof, service: 5 })).toThrow(RangeError);
  });
});

describe('handshake state machine', () => {
  it('normal: both sides established, CRC on, leftover FPDU bytes after the reply handed over', () => {
    const { a, b, evB } = pair({ privateData: Uint8Array.of(5) });
    expect(evB[0]).toMatchObject({ type: 'request', info: { revision: 2, enhanced: true, crc: true, privateData: Uint8Array.of(5) } });
    const rep = sent(b.accept());
    const withData = new Uint8Array(rep.length + 3);
    withData.set(rep);
    withData.set([1, 2, 3], rep.length);
    // Reply split byte by byte: the state machine resumes.
    let evA: MpaEvent[] = [];
    for (let i = 0; i < withData.length - 3; i++) evA = evA.concat(a.receive(withData.subarray(i, i + 1), 2));
    evA = evA.concat(a.receive(withData.subarray(withData.length - 3), 2));
    const est = evA.find((e) => e.type === 'established');
    expect(est).toBeDefined();
    expect(est && est.type === 'established' && est.result).toMatchObject({ role: 'initiator', crc: true, markersTx: false, markersRx: false, revision: 2 });
    expect(a.state).toBe('done');
  });

  it('reads that land in one reused Buffer (the socket\'s spare read buffer): each chunk is kept, not aliased', () => {
    const { a, b } = pair();
    const rep = sent(b.accept());
    // Buffer#slice does not copy: a handshake that keeps it keeps the socket's next read instead.
    const spare = Buffer.alloc(64);
    let evA: MpaEvent[] = [];
    for (const [from, to] of [[0, 3], [3, 10], [10, rep.length]] as const) {
      spare.set(rep.subarray(from, to));
      evA = evA.concat(a.receive(spare.subarray(0, to - from), 2));
      spare.fill(0x20);
    }
    expect(evA).toEqual([expect.objectContaining({ type: 'established' })]);
  });

  it('leftover: bytes after the reply in the same read', () => {
    const { a, b } = pair();
    const rep = sent(b.accept());
    const evA = a.receive(Uint8Array.from([...rep, 9, 8, 7]), 2);
    expect(evA).toEqual([expect.objectContaining({ type: 'established', leftover: Uint8Array.of(9, 8, 7) })]);
  });

  it('revision-1 peer: our v2 responder answers v1; our v2 initiator accepts a v1 reply', () => {
    const { b, evB } = pair({ revision: 1 });
    expect(evB[0]).toMatchObject({ info: { revision: 1, enhanced: false } });
    const evs = b.accept();
    expect(evs[1]).toMatchObject({ result: { revision: 1, enhanced: false } });
    // A v1-only responder (simulated with revision: 1) answering our v2 request.
    const { a, b: old } = pair({}, { revision: 1 });
    const rep = sent(old.accept(Uint8Array.of(4)));
    expect(rep[17]).toBe(1);
    expect(a.receive(rep, 1)).toEqual([expect.objectContaining({ type: 'established', result: expect.objectContaining({ revision: 1, enhanced: false, peerPrivateData: Uint8Array.of(4) }) })]);
  });

  it('CRC negotiation: off only when both say off; a responder may turn it on', () => {
    for (const [ic, rc, want] of [[true, true, true], [true, false, true], [false, true, true], [false, false, false]] as const) {
      const { a, b } = pair({ crc: ic }, { crc: rc });
      const evs = b.accept();
      const rep = sent(evs);
      expect((rep[16]! & 0x40) !== 0).toBe(want);
      expect(evs[1]).toMatchObject({ result: { crc: want } });
      expect(a.receive(rep, 1)[0]).toMatchObject({ type: 'established', result: { crc: want } });
    }
  });

  it('CRC mismatch: a reply without C to a request with C fails with a clear reason', () => {
    const a = new MpaHandshake({ role: 'initiator', crc: true });
    a.start(0);
    const rep = Uint8Array.from([...REP_KEY, 0x10, 0x02, 0x00, 0x04, 0, 16, 0, 16]);
    const evs = a.receive(rep, 1);
    expect(evs).toEqual([expect.objectContaining({ type: 'failed', fault: expect.objectContaining({ code: 'CRC_MISMATCH', layer: 2, etype: 0, ecode: 4 }) })]);
    expect((evs[0] as { fault: { reason: string } }).fault.reason).toMatch(/CRC/);
  });

  it('markers requested by either side: each side inserts them iff the other asked', () => {
    {
      const { a, b } = pair({ markers: true }, {});
      const evs = b.accept();
      expect(evs[1]).toMatchObject({ result: { markersTx: true, markersRx: false } });
      expect(a.receive(sent(evs), 1)[0]).toMatchObject({ result: { markersTx: false, markersRx: true } });
    }
    {
      const { a, b } = pair({}, { markers: true });
      const evs = b.accept();
      expect(sent(evs)[16]! & 0x80).toBe(0x80);
      expect(evs[1]).toMatchObject({ result: { markersTx: false, markersRx: true } });
      expect(a.receive(sent(evs), 1)[0]).toMatchObject({ result: { markersTx: true, markersRx: false } });
    }
  });

  it('reject with a reason: R bit, reason carried in the sabre block and surfaced to the initiator', () => {
    const { a, b } = pair();
    const evs = b.reject('no QP 42 here');
    const rep = sent(evs);
    expect(rep[16]! & 0x20).toBe(0x20);
    expect(evs[1]).toMatchObject({ type: 'failed', rejected: true });
    expect(a.receive(rep, 1)).toEqual([expect.objectContaining({ type: 'failed', rejected: true, fault: expect.objectContaining({ code: 'REJECTED', reason: 'no QP 42 here' }) })]);
  });

  it('a busy reject (backlog full) carries the sabre block\'s BUSY flag and surfaces as BUSY, a plain one as REJECTED', () => {
    const { a, b } = pair();
    const rep = sent(b.reject('backlog full', undefined, true));
    expect(a.receive(rep, 1)).toEqual([expect.objectContaining({ type: 'failed', rejected: true, fault: expect.objectContaining({ code: 'BUSY', reason: 'backlog full' }) })]);
    const block = encodeSabrePd({ kind: 'reject', reason: 'full', busy: true });
    expect([block[4], block[5]]).toEqual([0x00, 0x01]);
    expect(decodeSabrePd(block)).toEqual({ kind: 'reject', reason: 'full', busy: true });
    const plain = encodeSabrePd({ kind: 'reject', reason: 'no' });
    expect([plain[4], plain[5]]).toEqual([0x00, 0x00]);
    expect(decodeSabrePd(plain)).toEqual({ kind: 'reject', reason: 'no' });
  });

  it('peer-to-peer: a Write RTR is agreed; a peer offering only other RTR types is rejected (LLP ecode 7)', () => {
    const { a, b } = pair({ p2p: true });
    const evs = b.accept();
    expect(evs[1]).toMatchObject({ result: { rtr: 'write' } });
    expect(a.receive(sent(evs), 1)[0]).toMatchObject({ result: { rtr: 'write' } });
    const r = new MpaHandshake({ role: 'responder' });
    r.start(0);
    // P2P with a Read RTR only: IRD word 0x8010, ORD word 0x4010.
    const req = Uint8Array.from([...REQ_KEY, 0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0x40, 0x10]);
    const out = r.receive(req, 1);
    expect(out[1]).toMatchObject({ type: 'failed', fault: { code: 'NO_MATCHING_RTR', ecode: 7 } });
    expect(sent(out)[16]! & 0x20).toBe(0x20);
  });

  it('garbage instead of the key fails at once (no 20-byte wait), without throwing', () => {
    const r = new MpaHandshake({ role: 'responder' });
    r.start(0);
    expect(r.receive(new TextEncoder().encode('GET / HTTP/1.1\r\n'), 1)).toEqual([
      expect.objectContaining({ type: 'failed', fault: expect.objectContaining({ code: 'BAD_KEY', ecode: 4 }) }),
    ]);
    const i = new MpaHandshake({ role: 'initiator' });
    i.start(0);
    // A Request where a Reply belongs.
    expect(i.receive(Uint8Array.from(REQ_KEY), 1)[0]).toMatchObject({ type: 'failed', fault: { code: 'BAD_KEY' } });
  });

  it('bad revision, oversized private data, data before our reply', () => {
    const mk = (b16: number, rev: number, pdLen: number) => Uint8Array.from([...REQ_KEY, b16, rev, pdLen >> 8, pdLen & 0xff]);
    let r = new MpaHandshake({ role: 'responder' });
    r.start(0);
    expect(r.receive(mk(0x40, 3, 0), 1)[0]).toMatchObject({ fault: { code: 'BAD_REVISION' } });
    r = new MpaHandshake({ role: 'responder' });
    r.start(0);
    expect(r.receive(mk(0x40, 1, 600), 1)[0]).toMatchObject({ fault: { code: 'BAD_LENGTH' } });
    r = new MpaHandshake({ role: 'responder' });
    r.start(0);
    expect(r.receive(Uint8Array.from([...mk(0x40, 1, 0), 0, 0]), 1)[0]).toMatchObject({ fault: { code: 'EARLY_DATA' } });
  });

  it('timeouts from the clock: initiator waiting for the reply, responder waiting for the request or for accept', () => {
    const a = new MpaHandshake({ role: 'initiator', timeoutMs: 100 });
    a.start(1000);
    expect(a.tick(1099)).toEqual([]);
    expect(a.tick(1100)).toEqual([expect.objectContaining({ type: 'failed', fault: expect.objectContaining({ code: 'TIMEOUT' }) })]);
    expect(a.tick(2000)).toEqual([]);
    const { b } = pair({}, { timeoutMs: 50 });
    expect(b.state).toBe('requested');
    expect(b.tick(60)[0]).toMatchObject({ fault: { code: 'TIMEOUT' } });
    expect(b.accept()).toEqual([]);
  });

  it('closed during the handshake', () => {
    const a = new MpaHandshake({ role: 'initiator' });
    a.start(0);
    expect(a.closed()[0]).toMatchObject({ fault: { code: 'CLOSED', ecode: 1 } });
  });
});
