// The RDMA-connection messages of the file service: fileHdr + the opcode's body (layouts in
// src/wire/spec.ts, "File service (M6)"). Decoding checks every length before it reads: the
// header, the fixed body, each tail (path bytes, vector entries, data) against what the message
// really holds; a u64 that is not a safe integer and a path that is not UTF-8 are refused too.
// What the numbers mean against local state (limits, file ids) is the state machines' business.
import {
  FILE_AUTH_REQ, FILE_AUTH_RESP, FILE_CLOSE, FILE_HDR, FILE_LIST, FILE_MAX_PATH, FILE_READ, FILE_READ_V, FILE_READ_V_ENTRY,
  FILE_REGISTER, FILE_SEAL, FILE_STATUS_BODY, FILE_WRITE, FILE_WRITE_V, FILE_WRITE_V_ENTRY, FILE_OPCODES, FileOp,
} from '../wire/files-spec.js';
import { bytesAt, readFields, writeFields } from './layout.js';

export const HDR_LEN = FILE_HDR.size;
/** A status block: fileHdr ‖ fileStatus ‖ fileSeal. */
export const STATUS_BLOCK_LEN = FILE_HDR.size + FILE_STATUS_BODY.size + FILE_SEAL.size;

export interface FileHeader {
  opcode: number;
  flags: number;
  creditsRequested: number;
  creditsGranted: number;
  slot: number;
  requestId: number;
  info: number;
}

export interface StatusFields {
  status: number;
  aux: number;
  value: number;
}

export interface ReadVEntry {
  offset: number;
  sinkAddr: number;
  length: number;
}

export interface WriteVEntry {
  offset: number;
  length: number;
}

export type Body =
  | {
    op: typeof FileOp.AuthenticateRequest; resumeKey: Uint8Array; keyId: Uint8Array; nonce: Uint8Array; mac: Uint8Array;
    /** Bytes 88..107 of the body: what the MAC covers besides the keys and the nonce. */
    params: Uint8Array; statusAddr: number; statusRkey: number; statusSlots: number; maxReceiveSize: number;
  }
  | {
    op: typeof FileOp.AuthenticateResponse; status: number; maxReceiveSize: number; maxReadWriteSize: number; maxWriteSize: number;
    maxVectors: number; maxOpenFiles: number; rwDepth: number; creditsMax: number; mac: Uint8Array;
    /** Bytes 0..23 of the body, covered by the MAC. */
    params: Uint8Array;
  }
  | ({ op: typeof FileOp.StatusResponse | typeof FileOp.InterruptResponse } & StatusFields)
  | ({ op: typeof FileOp.Completion; seal: number } & StatusFields)
  | { op: typeof FileOp.RegisterFile; access: number; mode: number; path: string }
  | { op: typeof FileOp.Read; fileId: number; length: number; offset: number; sinkAddr: number; sinkRkey: number }
  | { op: typeof FileOp.ReadV; fileId: number; sinkAddr: number; sinkRkey: number; entries: ReadVEntry[] }
  | { op: typeof FileOp.Write; fileId: number; offset: number; length: number; dataOff: number }
  | { op: typeof FileOp.WriteV; fileId: number; entries: WriteVEntry[]; dataOff: number; dataLen: number }
  | { op: typeof FileOp.Close; fileId: number; discard: number }
  | { op: typeof FileOp.List; cookie: number; sinkLength: number; sinkAddr: number; sinkRkey: number; path: string }
  | { op: typeof FileOp.Cancel | typeof FileOp.Credit | typeof FileOp.DeltaCredit | typeof FileOp.InterruptRequest };

export type Decoded<T> = { ok: true; value: T } | { ok: false; error: string };

const fail = (error: string): { ok: false; error: string } => ({ ok: false, error });
const utf8 = new TextDecoder('utf-8', { fatal: true });
const enc = new TextEncoder();

export const opcodeName = (op: number): string => FILE_OPCODES.find((o) => o.code === op)?.name ?? `opcode ${op}`;

export function decodeHeader(b: Uint8Array): Decoded<FileHeader> {
  if (b.length < HDR_LEN) return fail(`message of ${b.length} bytes is shorter than the ${HDR_LEN}-byte header`);
  const h = readFields(FILE_HDR, b, 0);
  if (!FILE_OPCODES.some((o) => o.code === h.opcode)) return fail(`unknown opcode ${h.opcode}`);
  return { ok: true, value: h };
}

function path(b: Uint8Array, at: number, len: number, allowEmpty: boolean): Decoded<string> {
  if (len > FILE_MAX_PATH) return fail(`path of ${len} bytes exceeds ${FILE_MAX_PATH}`);
  if (len === 0 && !allowEmpty) return fail('empty path');
  if (at + len !== b.length) return fail(`path length ${len} disagrees with the message (${b.length - at} bytes follow)`);
  try {
    return { ok: true, value: utf8.decode(b.subarray(at, at + len)) };
  } catch {
    return fail('path is not UTF-8');
  }
}

function exact(b: Uint8Array, size: number, what: string): string | undefined {
  const want = HDR_LEN + size;
  return b.length === want ? undefined : `${what} must be ${want} bytes, got ${b.length}`;
}

function atLeast(b: Uint8Array, size: number, what: string): string | undefined {
  const want = HDR_LEN + size;
  return b.length >= want ? undefined : `${what} needs at least ${want} bytes, got ${b.length}`;
}

const unsafe = (...xs: number[]): boolean => xs.some((x) => x < 0);

/** The body of a message whose header decoded as `h`. */
export function decodeBody(h: FileHeader, b: Uint8Array): Decoded<Body> {
  const B = HDR_LEN;
  let e: string | undefined;
  switch (h.opcode) {
    case FileOp.AuthenticateRequest: {
      if ((e = exact(b, FILE_AUTH_REQ.size, 'AuthenticateRequest'))) return fail(e);
      const f = readFields(FILE_AUTH_REQ, b, B);
      if (unsafe(f.statusAddr)) return fail('statusAddr is not a safe integer');
      return {
        ok: true,
        value: {
          op: h.opcode, resumeKey: bytesAt(FILE_AUTH_REQ, b, B, 'resumeKey'), keyId: bytesAt(FILE_AUTH_REQ, b, B, 'keyId'),
          nonce: bytesAt(FILE_AUTH_REQ, b, B, 'nonce'), mac: bytesAt(FILE_AUTH_REQ, b, B, 'mac'),
          params: b.slice(B + FILE_AUTH_REQ.fields.statusAddr.offset, B + FILE_AUTH_REQ.size),
          statusAddr: f.statusAddr, statusRkey: f.statusRkey, statusSlots: f.statusSlots, maxReceiveSize: f.maxReceiveSize,
        },
      };
    }
    case FileOp.AuthenticateResponse: {
      if ((e = exact(b, FILE_AUTH_RESP.size, 'AuthenticateResponse'))) return fail(e);
      const f = readFields(FILE_AUTH_RESP, b, B);
      return {
        ok: true,
        value: {
          op: h.opcode, status: f.status, maxReceiveSize: f.maxReceiveSize, maxReadWriteSize: f.maxReadWriteSize, maxWriteSize: f.maxWriteSize,
          maxVectors: f.maxVectors, maxOpenFiles: f.maxOpenFiles, rwDepth: f.rwDepth, creditsMax: f.creditsMax,
          mac: bytesAt(FILE_AUTH_RESP, b, B, 'mac'), params: b.slice(B, B + FILE_AUTH_RESP.fields.mac.offset),
        },
      };
    }
    case FileOp.StatusResponse:
    case FileOp.InterruptResponse: {
      if ((e = exact(b, FILE_STATUS_BODY.size, opcodeName(h.opcode)))) return fail(e);
      const f = readFields(FILE_STATUS_BODY, b, B);
      if (unsafe(f.value)) return fail('value is not a safe integer');
      return { ok: true, value: { op: h.opcode, status: f.status, aux: f.aux, value: f.value } };
    }
    case FileOp.Completion: {
      if ((e = exact(b, FILE_STATUS_BODY.size + FILE_SEAL.size, 'Completion'))) return fail(e);
      const f = readFields(FILE_STATUS_BODY, b, B);
      const s = readFields(FILE_SEAL, b, B + FILE_STATUS_BODY.size);
      if (unsafe(f.value)) return fail('value is not a safe integer');
      return { ok: true, value: { op: h.opcode, status: f.status, aux: f.aux, value: f.value, seal: s.seal } };
    }
    case FileOp.RegisterFile: {
      if ((e = atLeast(b, FILE_REGISTER.size, 'RegisterFile'))) return fail(e);
      const f = readFields(FILE_REGISTER, b, B);
      const p = path(b, B + FILE_REGISTER.size, f.pathLen, false);
      if (!p.ok) return p;
      return { ok: true, value: { op: h.opcode, access: f.access, mode: f.mode, path: p.value } };
    }
    case FileOp.Read: {
      if ((e = exact(b, FILE_READ.size, 'Read'))) return fail(e);
      const f = readFields(FILE_READ, b, B);
      if (unsafe(f.offset, f.sinkAddr)) return fail('offset or sinkAddr is not a safe integer');
      return { ok: true, value: { op: h.opcode, fileId: f.fileId, length: f.length, offset: f.offset, sinkAddr: f.sinkAddr, sinkRkey: f.sinkRkey } };
    }
    case FileOp.ReadV: {
      if ((e = atLeast(b, FILE_READ_V.size, 'ReadV'))) return fail(e);
      const f = readFields(FILE_READ_V, b, B);
      const start = B + FILE_READ_V.size;
      // The count is checked against the bytes present before a single entry is read.
      if (f.count === 0 || start + f.count * FILE_READ_V_ENTRY.size !== b.length) return fail(`ReadV count ${f.count} disagrees with the message length ${b.length}`);
      if (unsafe(f.sinkAddr)) return fail('sinkAddr is not a safe integer');
      const entries: ReadVEntry[] = [];
      for (let i = 0; i < f.count; i++) {
        const x = readFields(FILE_READ_V_ENTRY, b, start + i * FILE_READ_V_ENTRY.size);
        if (unsafe(x.offset, x.sinkAddr)) return fail(`ReadV entry ${i} has an unsafe offset or sinkAddr`);
        entries.push({ offset: x.offset, sinkAddr: x.sinkAddr, length: x.length });
      }
      return { ok: true, value: { op: h.opcode, fileId: f.fileId, sinkAddr: f.sinkAddr, sinkRkey: f.sinkRkey, entries } };
    }
    case FileOp.Write: {
      if ((e = atLeast(b, FILE_WRITE.size, 'Write'))) return fail(e);
      const f = readFields(FILE_WRITE, b, B);
      const dataOff = B + FILE_WRITE.size;
      if (dataOff + f.length !== b.length) return fail(`Write length ${f.length} disagrees with the ${b.length - dataOff} data bytes present`);
      if (unsafe(f.offset)) return fail('offset is not a safe integer');
      return { ok: true, value: { op: h.opcode, fileId: f.fileId, offset: f.offset, length: f.length, dataOff } };
    }
    case FileOp.WriteV: {
      if ((e = atLeast(b, FILE_WRITE_V.size, 'WriteV'))) return fail(e);
      const f = readFields(FILE_WRITE_V, b, B);
      const start = B + FILE_WRITE_V.size;
      const dataOff = start + f.count * FILE_WRITE_V_ENTRY.size;
      if (f.count === 0 || dataOff > b.length) return fail(`WriteV count ${f.count} does not fit the message length ${b.length}`);
      const entries: WriteVEntry[] = [];
      let sum = 0;
      for (let i = 0; i < f.count; i++) {
        const x = readFields(FILE_WRITE_V_ENTRY, b, start + i * FILE_WRITE_V_ENTRY.size);
        if (unsafe(x.offset)) return fail(`WriteV entry ${i} has an unsafe offset`);
        entries.push({ offset: x.offset, length: x.length });
        sum += x.length;
      }
      if (dataOff + sum !== b.length) return fail(`WriteV entries sum to ${sum} bytes, the message carries ${b.length - dataOff}`);
      return { ok: true, value: { op: h.opcode, fileId: f.fileId, entries, dataOff, dataLen: sum } };
    }
    case FileOp.Close: {
      if ((e = exact(b, FILE_CLOSE.size, 'Close'))) return fail(e);
      const f = readFields(FILE_CLOSE, b, B);
      if (f.discard > 1) return fail(`Close discard must be 0 or 1, got ${f.discard}`);
      return { ok: true, value: { op: h.opcode, fileId: f.fileId, discard: f.discard } };
    }
    case FileOp.List: {
      if ((e = atLeast(b, FILE_LIST.size, 'List'))) return fail(e);
      const f = readFields(FILE_LIST, b, B);
      if (unsafe(f.sinkAddr)) return fail('sinkAddr is not a safe integer');
      const p = path(b, B + FILE_LIST.size, f.pathLen, true);
      if (!p.ok) return p;
      return { ok: true, value: { op: h.opcode, cookie: f.cookie, sinkLength: f.sinkLength, sinkAddr: f.sinkAddr, sinkRkey: f.sinkRkey, path: p.value } };
    }
    case FileOp.Cancel:
    case FileOp.Credit:
    case FileOp.DeltaCredit:
    case FileOp.InterruptRequest:
      if ((e = exact(b, 0, opcodeName(h.opcode)))) return fail(e);
      return { ok: true, value: { op: h.opcode } };
    default:
      return fail(`unknown opcode ${h.opcode}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Encoding: into the caller's buffer (a registered send buffer, or a scratch copied inline).

export function encodeHeader(b: Uint8Array, h: FileHeader): void {
  writeFields(FILE_HDR, b, 0, h);
}

/** Bytes the message occupies before any data (Write/WriteV data travels as its own segment). */
export function bodyLength(body: Body): number {
  switch (body.op) {
    case FileOp.AuthenticateRequest: return FILE_AUTH_REQ.size;
    case FileOp.AuthenticateResponse: return FILE_AUTH_RESP.size;
    case FileOp.StatusResponse:
    case FileOp.InterruptResponse: return FILE_STATUS_BODY.size;
    case FileOp.Completion: return FILE_STATUS_BODY.size + FILE_SEAL.size;
    case FileOp.RegisterFile: return FILE_REGISTER.size + enc.encode(body.path).length;
    case FileOp.Read: return FILE_READ.size;
    case FileOp.ReadV: return FILE_READ_V.size + body.entries.length * FILE_READ_V_ENTRY.size;
    case FileOp.Write: return FILE_WRITE.size;
    case FileOp.WriteV: return FILE_WRITE_V.size + body.entries.length * FILE_WRITE_V_ENTRY.size;
    case FileOp.Close: return FILE_CLOSE.size;
    case FileOp.List: return FILE_LIST.size + enc.encode(body.path).length;
    default: return 0;
  }
}

/** Header + body into `b` (at least HDR_LEN + bodyLength(body) bytes); returns that length. */
/** A message in bytes of its own: `h`, then `body`. */
export function encodeToBytes(h: FileHeader, body: Body): Uint8Array {
  const b = new Uint8Array(HDR_LEN + bodyLength(body));
  encodeMessage(b, h, body);
  return b;
}

export function encodeMessage(b: Uint8Array, h: FileHeader, body: Body): number {
  encodeHeader(b, h);
  const B = HDR_LEN;
  switch (body.op) {
    case FileOp.AuthenticateRequest:
      writeFields(FILE_AUTH_REQ, b, B, body);
      return B + FILE_AUTH_REQ.size;
    case FileOp.AuthenticateResponse:
      writeFields(FILE_AUTH_RESP, b, B, body);
      return B + FILE_AUTH_RESP.size;
    case FileOp.StatusResponse:
    case FileOp.InterruptResponse:
      writeFields(FILE_STATUS_BODY, b, B, body);
      return B + FILE_STATUS_BODY.size;
    case FileOp.Completion:
      writeFields(FILE_STATUS_BODY, b, B, body);
      writeFields(FILE_SEAL, b, B + FILE_STATUS_BODY.size, { seal: body.seal });
      return STATUS_BLOCK_LEN;
    case FileOp.RegisterFile: {
      const p = enc.encode(body.path);
      writeFields(FILE_REGISTER, b, B, { access: body.access, mode: body.mode, pathLen: p.length });
      b.set(p, B + FILE_REGISTER.size);
      return B + FILE_REGISTER.size + p.length;
    }
    case FileOp.Read:
      writeFields(FILE_READ, b, B, body);
      return B + FILE_READ.size;
    case FileOp.ReadV: {
      writeFields(FILE_READ_V, b, B, { fileId: body.fileId, count: body.entries.length, sinkAddr: body.sinkAddr, sinkRkey: body.sinkRkey });
      let at = B + FILE_READ_V.size;
      for (const x of body.entries) {
        writeFields(FILE_READ_V_ENTRY, b, at, x);
        at += FILE_READ_V_ENTRY.size;
      }
      return at;
    }
    case FileOp.Write:
      writeFields(FILE_WRITE, b, B, body);
      return B + FILE_WRITE.size;
    case FileOp.WriteV: {
      writeFields(FILE_WRITE_V, b, B, { fileId: body.fileId, count: body.entries.length });
      let at = B + FILE_WRITE_V.size;
      for (const x of body.entries) {
        writeFields(FILE_WRITE_V_ENTRY, b, at, x);
        at += FILE_WRITE_V_ENTRY.size;
      }
      return at;
    }
    case FileOp.Close:
      writeFields(FILE_CLOSE, b, B, body);
      return B + FILE_CLOSE.size;
    case FileOp.List: {
      const p = enc.encode(body.path);
      writeFields(FILE_LIST, b, B, { cookie: body.cookie, sinkLength: body.sinkLength, sinkAddr: body.sinkAddr, sinkRkey: body.sinkRkey, pathLen: p.length });
      b.set(p, B + FILE_LIST.size);
      return B + FILE_LIST.size + p.length;
    }
    default:
      return B;
  }
}
