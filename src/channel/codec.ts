// Message payloads: a Uint8Array goes as it is (and arrives as a Uint8Array); any other value is
// msgpack-encoded and arrives decoded. Plain MessagePack (no record extension): values stay
// readable by any MessagePack decoder, and no decoder state is shared between messages a peer
// could poison. Pre-seeded shared structures would make small records faster, but they only pay
// for shapes both ends know in advance — the channel's own control messages are fixed layouts
// instead (src/wire/spec.ts).
//
// Untrusted input: msgpackr has no size or depth limit, so the frame is bounded before it gets
// here (a slot, or an OFFER checked against maxMessage) and every decode error — truncation,
// a nesting deep enough to overflow the stack, a bad extension — is caught and reported.
import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false, copyBuffers: true });

export function encodeValue(v: unknown): Uint8Array {
  return packr.pack(v);
}

/** The decoded value, or an Error saying why not. */
export function decodeValue(b: Uint8Array): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: packr.unpack(b) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
  }
}
