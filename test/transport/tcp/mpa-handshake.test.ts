// MPA Request/Reply bytes written out from the RFC 5044 §7.1 / RFC 6581 §5 diagrams, and the
// handshake state machine driven directly (no sockets, no sleeps: the clock is a number).
import { describe, expect, it } from 'vitest';
import { MpaHandshake, type MpaConfig, type MpaEvent } from '../../../src/transport/tcp/mpa-handshake.js';
import { provesReply, provesRequest, replyProof, requestProof } from '../../../src/transport/tcp/connect-proof.js';
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

  it('sabre private data of a QP-to-QP connect with a secret: flags.Proof, then salt and MAC, which bind role, QPNs, nonce (and a Reply the Request\'s salt)', () => {
    const secret = new Uint8Array(32).fill(7);
    const p = { initiatorQpn: 3, responderQpn: 9, nonce: 0x01020304 };
    const proof = requestProof(secret, p);
    const block = encodeSabrePd({ kind: 'connect', ...p, proof });
    expect([...block.subarray(0, 18)]).toEqual([0x00, 0x20, 0x01, 0x01, 0x00, 0x02, 0, 0, 0, 3, 0, 0, 0, 9, 1, 2, 3, 4]);
    expect([...block.subarray(18)]).toEqual([...proof]);
    expect(decodeSabrePd(block)).toEqual({ kind: 'connect', ...p, proof });
    expect(provesRequest(secret, p, proof)).toBe(true);
    // A fresh salt each time: the same pairing's Requests differ.
    expect([...requestProof(secret, p).subarray(0, 8)]).not.toEqual([...proof.subarray(0, 8)]);
    // Another QPN, nonce, secret, role, or no proof does not pass.
    expect(provesRequest(secret, { ...p, initiatorQpn: 4 }, proof)).toBe(false);
    expect(provesRequest(secret, { ...p, nonce: 0x01020305 }, proof)).toBe(false);
    expect(provesRequest(new Uint8Array(32).fill(8), p, proof)).toBe(false);
    expect(provesRequest(secret, p, undefined)).toBe(false);
    const reply = replyProof(secret, { ...p, nonce: 77 }, proof);
    expect(provesReply(secret, { ...p, nonce: 77 }, reply, proof)).toBe(true);
    expect(provesRequest(secret, { ...p, nonce: 77 }, reply)).toBe(false);
    // A Reply to another Request (another salt) proves nothing to this one.
    expect(provesReply(secret, { ...p, nonce: 77 }, reply, requestProof(secret, p))).toBe(false);
    // The flag with a body of another length is not sabre's; a proof does not go with a service.
    expect(decodeSabrePd(Uint8Array.of(0x00, 0x1f, ...block.subarray(2, 33)))).toBeUndefined();
    expect(() => encodeSabrePd({ kind: 'connect', initiatorQpn: 3, responderQpn: 0, nonce: 1, proof, service: 5 })).toThrow(RangeError);
  });

  it('a crossing connect\'s REJECT: flags.Crossing, the reason, then the rejecting end\'s nonce as the last 4 bytes', () => {
    const block = encodeSabrePd({ kind: 'reject', reason: 'crossing connect: x', crossingNonce: 0x01020304 });
    // blockLen 4 + 19 + 4, version 1, kind REJECT, flags 0x0004; the text; the nonce big-endian.
    expect([...block.subarray(0, 6)]).toEqual([0x00, 27, 1, 2, 0x00, 0x04]);
    expect(new TextDecoder().decode(block.subarray(6, 25))).toBe('crossing connect: x');
    expect([...block.subarray(25)]).toEqual([1, 2, 3, 4]);
    expect(decodeSabrePd(block)).toEqual({ kind: 'reject', reason: 'crossing connect: x', crossingNonce: 0x01020304 });
    // A decoder that does not know the flag reads the reason to the block's end: it still starts "crossing connect".
    expect(new TextDecoder().decode(block.subarray(6)).startsWith('crossing connect')).toBe(true);
    // The flag on a block too short for the nonce is not sabre's; a plain REJECT has no nonce.
    expect(decodeSabrePd(Uint8Array.of(0x00, 0x06, 1, 2, 0x00, 0x04, 0x41, 0x42))).toBeUndefined();
    expect(decodeSabrePd(encodeSabrePd({ kind: 'reject', reason: 'no' }))).toEqual({ kind: 'reject', reason: 'no' });
  });
});

describe('peer-to-peer RTR: asked for (p2p: true) or offered (p2p: \'offer\', a sabre QP-to-QP dial)', () => {
  // Replies of a standard responder that does not do P2P: revision 2 with P clear, and revision 1.
  const DECLINED = Uint8Array.of(...REP_KEY, 0x50, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10);
  const REV1 = Uint8Array.of(...REP_KEY, 0x40, 0x01, 0x00, 0x00);

  it.each([true, 'offer'] as const)('p2p %s: the Request says P and WriteRTR; a sabre responder takes it and awaits the Write RTR', (p2p) => {
    const { a, b, req } = pair({ p2p, ird: 16, ord: 16 });
    expect([...req.subarray(16, 24)]).toEqual([0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0x80, 0x10]);
    const reply = b.accept();
    expect(reply.find((e) => e.type === 'established')).toMatchObject({ result: { role: 'responder', rtr: 'write' } });
    expect(a.receive(sent(reply), 2).find((e) => e.type === 'established')).toMatchObject({ result: { role: 'initiator', rtr: 'write' } });
  });

  it.each([['P clear', DECLINED], ['revision 1', REV1]] as const)('a Reply that declines P2P (%s): p2p true fails (no matching RTR), \'offer\' goes on without an RTR', (_, bytes) => {
    const strict = new MpaHandshake({ role: 'initiator', p2p: true });
    strict.start(0);
    expect(strict.receive(bytes, 1)).toEqual([expect.objectContaining({ type: 'failed', fault: expect.objectContaining({ code: 'NO_MATCHING_RTR' }) })]);
    const offer = new MpaHandshake({ role: 'initiator', p2p: 'offer' });
    offer.start(0);
    expect(offer.receive(bytes, 1)).toEqual([expect.objectContaining({ type: 'established', result: expect.objectContaining({ rtr: 'none' }) })]);
  });

  it('a Reply with P set but another RTR type than Write fails an offer too: that responder would wait for an RTR never sent', () => {
    const offer = new MpaHandshake({ role: 'initiator', p2p: 'offer' });
    offer.start(0);
    const readRtr = Uint8Array.of(...REP_KEY, 0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0x40, 0x10);
    expect(offer.receive(readRtr, 1)).toEqual([expect.objectContaining({ type: 'failed', fault: expect.objectContaining({ code: 'NO_MATCHING_RTR' }) })]);
  });
});
