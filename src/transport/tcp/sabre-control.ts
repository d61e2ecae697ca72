// sabre's control message on a TCP stream (RDMAP opcode 15, see SABRE_CONTROL in
// src/wire/spec.ts): the engine's ack, RNR and sequence notes between two sabre peers, as one
// untagged DDP segment (QN 0, MSN 0, MO 0, L) so the stream stays well-formed iWARP.
import { encodeDdp, RdmapOpcode } from '../../wire/rdmap.js';
import { QN, SabreControlKind, UNTAGGED_HDR_LEN } from '../../wire/spec.js';
import { SABRE_CONTROL_SIZE, getSabreControlKind, getSabreControlSsn, setSabreControlKind, setSabreControlSsn } from '../../wire/fields.gen.js';

export { SabreControlKind };

export const SABRE_CONTROL_ULPDU = UNTAGGED_HDR_LEN + SABRE_CONTROL_SIZE;

/** The DDP header every control message carries (no field of it varies). */
const TEMPLATE = new Uint8Array(SABRE_CONTROL_ULPDU);
encodeDdp({ tagged: false, last: true, opcode: RdmapOpcode.SabreControl, ulp: 0, qn: QN.Send, msn: 0, mo: 0 }, TEMPLATE, 0);

/**
 * The whole ULPDU (DDP header + payload), framed as one FPDU. Into `into` when given (a scratch
 * the caller frames at once: an ack goes out per message received, and this saves it an
 * allocation), else a new buffer.
 */
export function encodeSabreControl(kind: number, ssn: number, into?: Uint8Array): Uint8Array {
  const b = into ?? new Uint8Array(SABRE_CONTROL_ULPDU);
  b.set(TEMPLATE);
  const o = UNTAGGED_HDR_LEN;
  setSabreControlKind(b, o, kind);
  setSabreControlSsn(b, o, ssn);
  return b;
}

/** Decode the payload after the DDP header; undefined when it is not a control we know. */
export function decodeSabreControl(u8: Uint8Array, at: number, len: number): { kind: number; ssn: number } | undefined {
  if (len < SABRE_CONTROL_SIZE) return undefined;
  const kind = getSabreControlKind(u8, at);
  if (kind !== SabreControlKind.Ack && kind !== SabreControlKind.Rnr && kind !== SabreControlKind.Seq) return undefined;
  return { kind, ssn: getSabreControlSsn(u8, at) };
}
