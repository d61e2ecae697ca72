// The RDMA-connection messages of the file service: fileHdr + the opcode's body (layouts in
// src/wire/files-spec.ts, read and written through the accessors generated from them,
// files-fields.gen.ts). Decoding checks every length before it reads: the header, the fixed body,
// each tail (path bytes, vector entries, data) against what the message really holds; a u64 that
// is not a safe integer (read as -1) and a path that is not UTF-8 are refused too. What the
// numbers mean against local state (limits, file ids) is the state machines' business.
import * as F from '../wire/files-fields.gen.js';
import { FILE_MAX_PATH, FILE_OPCODES, FileOp } from '../wire/files-spec.js';

export const HDR_LEN = F.FILE_HDR_SIZE;
/** A status block: fileHdr ‖ fileStatus ‖ fileSeal. */
export const STATUS_BLOCK_LEN = F.FILE_HDR_SIZE + F.FILE_STATUS_SIZE + F.FILE_SEAL_SIZE;

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
  const h: FileHeader = {
    opcode: F.getFileHdrOpcode(b, 0),
    flags: F.getFileHdrFlags(b, 0),
    creditsRequested: F.getFileHdrCreditsRequested(b, 0),
    creditsGranted: F.getFileHdrCreditsGranted(b, 0),
    slot: F.getFileHdrSlot(b, 0),
    requestId: F.getFileHdrRequestId(b, 0),
    info: F.getFileHdrInfo(b, 0),
  };
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

/** A copy of `len` bytes at `at` (keys and MACs outlive the receive buffer they came in). */
const copyAt = (b: Uint8Array, at: number, len: number): Uint8Array => b.slice(at, at + len);

/** The status body at `at` (StatusResponse, InterruptResponse, a status block), or why not. */
function statusAt(b: Uint8Array, at: number): Decoded<StatusFields> {
  const value = F.getFileStatusValue(b, at);
  if (unsafe(value)) return fail('value is not a safe integer');
  return { ok: true, value: { status: F.getFileStatusStatus(b, at), aux: F.getFileStatusAux(b, at), value } };
}

/** The body of a message whose header decoded as `h`. */
export function decodeBody(h: FileHeader, b: Uint8Array): Decoded<Body> {
  const B = HDR_LEN;
  let e: string | undefined;
  switch (h.opcode) {
    case FileOp.AuthenticateRequest: {
      if ((e = exact(b, F.FILE_AUTH_REQ_SIZE, 'AuthenticateRequest'))) return fail(e);
      const statusAddr = F.getFileAuthReqStatusAddr(b, B);
      if (unsafe(statusAddr)) return fail('statusAddr is not a safe integer');
      return {
        ok: true,
        value: {
          op: h.opcode,
          resumeKey: copyAt(b, B + F.FILE_AUTH_REQ_RESUME_KEY_OFF, F.FILE_AUTH_REQ_RESUME_KEY_LEN),
          keyId: copyAt(b, B + F.FILE_AUTH_REQ_KEY_ID_OFF, F.FILE_AUTH_REQ_KEY_ID_LEN),
          nonce: copyAt(b, B + F.FILE_AUTH_REQ_NONCE_OFF, F.FILE_AUTH_REQ_NONCE_LEN),
          mac: copyAt(b, B + F.FILE_AUTH_REQ_MAC_OFF, F.FILE_AUTH_REQ_MAC_LEN),
          params: b.slice(B + F.FILE_AUTH_REQ_STATUS_ADDR_OFF, B + F.FILE_AUTH_REQ_SIZE),
          statusAddr, statusRkey: F.getFileAuthReqStatusRkey(b, B), statusSlots: F.getFileAuthReqStatusSlots(b, B),
          maxReceiveSize: F.getFileAuthReqMaxReceiveSize(b, B),
        },
      };
    }
    case FileOp.AuthenticateResponse: {
      if ((e = exact(b, F.FILE_AUTH_RESP_SIZE, 'AuthenticateResponse'))) return fail(e);
      return {
        ok: true,
        value: {
          op: h.opcode, status: F.getFileAuthRespStatus(b, B), maxReceiveSize: F.getFileAuthRespMaxReceiveSize(b, B),
          maxReadWriteSize: F.getFileAuthRespMaxReadWriteSize(b, B), maxWriteSize: F.getFileAuthRespMaxWriteSize(b, B),
          maxVectors: F.getFileAuthRespMaxVectors(b, B), maxOpenFiles: F.getFileAuthRespMaxOpenFiles(b, B),
          rwDepth: F.getFileAuthRespRwDepth(b, B), creditsMax: F.getFileAuthRespCreditsMax(b, B),
          mac: copyAt(b, B + F.FILE_AUTH_RESP_MAC_OFF, F.FILE_AUTH_RESP_MAC_LEN), params: b.slice(B, B + F.FILE_AUTH_RESP_MAC_OFF),
        },
      };
    }
    case FileOp.StatusResponse:
    case FileOp.InterruptResponse: {
      if ((e = exact(b, F.FILE_STATUS_SIZE, opcodeName(h.opcode)))) return fail(e);
      const st = statusAt(b, B);
      return st.ok ? { ok: true, value: { op: h.opcode, ...st.value } } : st;
    }
    case FileOp.Completion: {
      if ((e = exact(b, F.FILE_STATUS_SIZE + F.FILE_SEAL_SIZE, 'Completion'))) return fail(e);
      const st = statusAt(b, B);
      return st.ok ? { ok: true, value: { op: h.opcode, ...st.value, seal: F.getFileSealSeal(b, B + F.FILE_STATUS_SIZE) } } : st;
    }
    case FileOp.RegisterFile: {
      if ((e = atLeast(b, F.FILE_REGISTER_SIZE, 'RegisterFile'))) return fail(e);
      const p = path(b, B + F.FILE_REGISTER_SIZE, F.getFileRegisterPathLen(b, B), false);
      if (!p.ok) return p;
      return { ok: true, value: { op: h.opcode, access: F.getFileRegisterAccess(b, B), mode: F.getFileRegisterMode(b, B), path: p.value } };
    }
    case FileOp.Read: {
      if ((e = exact(b, F.FILE_READ_SIZE, 'Read'))) return fail(e);
      const offset = F.getFileReadOffset(b, B);
      const sinkAddr = F.getFileReadSinkAddr(b, B);
      if (unsafe(offset, sinkAddr)) return fail('offset or sinkAddr is not a safe integer');
      return { ok: true, value: { op: h.opcode, fileId: F.getFileReadFileId(b, B), length: F.getFileReadLength(b, B), offset, sinkAddr, sinkRkey: F.getFileReadSinkRkey(b, B) } };
    }
    case FileOp.ReadV: {
      if ((e = atLeast(b, F.FILE_READ_V_SIZE, 'ReadV'))) return fail(e);
      const count = F.getFileReadVCount(b, B);
      const start = B + F.FILE_READ_V_SIZE;
      // The count is checked against the bytes present before a single entry is read.
      if (count === 0 || start + count * F.FILE_READ_VENTRY_SIZE !== b.length) return fail(`ReadV count ${count} disagrees with the message length ${b.length}`);
      const sinkAddr = F.getFileReadVSinkAddr(b, B);
      if (unsafe(sinkAddr)) return fail('sinkAddr is not a safe integer');
      const entries: ReadVEntry[] = [];
      for (let i = 0, at = start; i < count; i++, at += F.FILE_READ_VENTRY_SIZE) {
        const x: ReadVEntry = { offset: F.getFileReadVEntryOffset(b, at), sinkAddr: F.getFileReadVEntrySinkAddr(b, at), length: F.getFileReadVEntryLength(b, at) };
        if (unsafe(x.offset, x.sinkAddr)) return fail(`ReadV entry ${i} has an unsafe offset or sinkAddr`);
        entries.push(x);
      }
      return { ok: true, value: { op: h.opcode, fileId: F.getFileReadVFileId(b, B), sinkAddr, sinkRkey: F.getFileReadVSinkRkey(b, B), entries } };
    }
    case FileOp.Write: {
      if ((e = atLeast(b, F.FILE_WRITE_SIZE, 'Write'))) return fail(e);
      const length = F.getFileWriteLength(b, B);
      const dataOff = B + F.FILE_WRITE_SIZE;
      if (dataOff + length !== b.length) return fail(`Write length ${length} disagrees with the ${b.length - dataOff} data bytes present`);
      const offset = F.getFileWriteOffset(b, B);
      if (unsafe(offset)) return fail('offset is not a safe integer');
      return { ok: true, value: { op: h.opcode, fileId: F.getFileWriteFileId(b, B), offset, length, dataOff } };
    }
    case FileOp.WriteV: {
      if ((e = atLeast(b, F.FILE_WRITE_V_SIZE, 'WriteV'))) return fail(e);
      const count = F.getFileWriteVCount(b, B);
      const start = B + F.FILE_WRITE_V_SIZE;
      const dataOff = start + count * F.FILE_WRITE_VENTRY_SIZE;
      if (count === 0 || dataOff > b.length) return fail(`WriteV count ${count} does not fit the message length ${b.length}`);
      const entries: WriteVEntry[] = [];
      let sum = 0;
      for (let i = 0, at = start; i < count; i++, at += F.FILE_WRITE_VENTRY_SIZE) {
        const x: WriteVEntry = { offset: F.getFileWriteVEntryOffset(b, at), length: F.getFileWriteVEntryLength(b, at) };
        if (unsafe(x.offset)) return fail(`WriteV entry ${i} has an unsafe offset`);
        entries.push(x);
        sum += x.length;
      }
      if (dataOff + sum !== b.length) return fail(`WriteV entries sum to ${sum} bytes, the message carries ${b.length - dataOff}`);
      return { ok: true, value: { op: h.opcode, fileId: F.getFileWriteVFileId(b, B), entries, dataOff, dataLen: sum } };
    }
    case FileOp.Close: {
      if ((e = exact(b, F.FILE_CLOSE_SIZE, 'Close'))) return fail(e);
      const discard = F.getFileCloseDiscard(b, B);
      if (discard > 1) return fail(`Close discard must be 0 or 1, got ${discard}`);
      return { ok: true, value: { op: h.opcode, fileId: F.getFileCloseFileId(b, B), discard } };
    }
    case FileOp.List: {
      if ((e = atLeast(b, F.FILE_LIST_SIZE, 'List'))) return fail(e);
      const sinkAddr = F.getFileListSinkAddr(b, B);
      if (unsafe(sinkAddr)) return fail('sinkAddr is not a safe integer');
      const p = path(b, B + F.FILE_LIST_SIZE, F.getFileListPathLen(b, B), true);
      if (!p.ok) return p;
      return {
        ok: true,
        value: { op: h.opcode, cookie: F.getFileListCookie(b, B), sinkLength: F.getFileListSinkLength(b, B), sinkAddr, sinkRkey: F.getFileListSinkRkey(b, B), path: p.value },
      };
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
// Each body is zeroed first, so reserved fields need no mention.

export function encodeHeader(b: Uint8Array, h: FileHeader): void {
  F.setFileHdrOpcode(b, 0, h.opcode);
  F.setFileHdrFlags(b, 0, h.flags);
  F.setFileHdrCreditsRequested(b, 0, h.creditsRequested);
  F.setFileHdrCreditsGranted(b, 0, h.creditsGranted);
  F.setFileHdrSlot(b, 0, h.slot);
  F.setFileHdrRequestId(b, 0, h.requestId);
  F.setFileHdrInfo(b, 0, h.info);
}

/** Bytes the message occupies before any data (Write/WriteV data travels as its own segment). */
export function bodyLength(body: Body): number {
  switch (body.op) {
    case FileOp.AuthenticateRequest: return F.FILE_AUTH_REQ_SIZE;
    case FileOp.AuthenticateResponse: return F.FILE_AUTH_RESP_SIZE;
    case FileOp.StatusResponse:
    case FileOp.InterruptResponse: return F.FILE_STATUS_SIZE;
    case FileOp.Completion: return F.FILE_STATUS_SIZE + F.FILE_SEAL_SIZE;
    case FileOp.RegisterFile: return F.FILE_REGISTER_SIZE + enc.encode(body.path).length;
    case FileOp.Read: return F.FILE_READ_SIZE;
    case FileOp.ReadV: return F.FILE_READ_V_SIZE + body.entries.length * F.FILE_READ_VENTRY_SIZE;
    case FileOp.Write: return F.FILE_WRITE_SIZE;
    case FileOp.WriteV: return F.FILE_WRITE_V_SIZE + body.entries.length * F.FILE_WRITE_VENTRY_SIZE;
    case FileOp.Close: return F.FILE_CLOSE_SIZE;
    case FileOp.List: return F.FILE_LIST_SIZE + enc.encode(body.path).length;
    default: return 0;
  }
}

/** A message in bytes of its own: `h`, then `body`. */
export function encodeToBytes(h: FileHeader, body: Body): Uint8Array {
  const b = new Uint8Array(HDR_LEN + bodyLength(body));
  encodeMessage(b, h, body);
  return b;
}

/** A bytes field: exactly its size (a key or MAC of another length is a bug, said loudly). */
function putBytes(b: Uint8Array, at: number, x: Uint8Array, len: number, what: string): void {
  if (x.length !== len) throw new RangeError(`${what} takes ${len} bytes, got ${x.length}`);
  b.set(x, at);
}

/** Header + body into `b` (at least HDR_LEN + bodyLength(body) bytes); returns that length. */
export function encodeMessage(b: Uint8Array, h: FileHeader, body: Body): number {
  encodeHeader(b, h);
  const B = HDR_LEN;
  switch (body.op) {
    case FileOp.AuthenticateRequest:
      b.fill(0, B, B + F.FILE_AUTH_REQ_SIZE);
      putBytes(b, B + F.FILE_AUTH_REQ_RESUME_KEY_OFF, body.resumeKey, F.FILE_AUTH_REQ_RESUME_KEY_LEN, 'fileAuthReq.resumeKey');
      putBytes(b, B + F.FILE_AUTH_REQ_KEY_ID_OFF, body.keyId, F.FILE_AUTH_REQ_KEY_ID_LEN, 'fileAuthReq.keyId');
      putBytes(b, B + F.FILE_AUTH_REQ_NONCE_OFF, body.nonce, F.FILE_AUTH_REQ_NONCE_LEN, 'fileAuthReq.nonce');
      putBytes(b, B + F.FILE_AUTH_REQ_MAC_OFF, body.mac, F.FILE_AUTH_REQ_MAC_LEN, 'fileAuthReq.mac');
      F.setFileAuthReqStatusAddr(b, B, body.statusAddr);
      F.setFileAuthReqStatusRkey(b, B, body.statusRkey);
      F.setFileAuthReqStatusSlots(b, B, body.statusSlots);
      F.setFileAuthReqMaxReceiveSize(b, B, body.maxReceiveSize);
      return B + F.FILE_AUTH_REQ_SIZE;
    case FileOp.AuthenticateResponse:
      F.setFileAuthRespStatus(b, B, body.status);
      F.setFileAuthRespMaxReceiveSize(b, B, body.maxReceiveSize);
      F.setFileAuthRespMaxReadWriteSize(b, B, body.maxReadWriteSize);
      F.setFileAuthRespMaxWriteSize(b, B, body.maxWriteSize);
      F.setFileAuthRespMaxVectors(b, B, body.maxVectors);
      F.setFileAuthRespMaxOpenFiles(b, B, body.maxOpenFiles);
      F.setFileAuthRespRwDepth(b, B, body.rwDepth);
      F.setFileAuthRespCreditsMax(b, B, body.creditsMax);
      putBytes(b, B + F.FILE_AUTH_RESP_MAC_OFF, body.mac, F.FILE_AUTH_RESP_MAC_LEN, 'fileAuthResp.mac');
      return B + F.FILE_AUTH_RESP_SIZE;
    case FileOp.StatusResponse:
    case FileOp.InterruptResponse:
      putStatus(b, B, body);
      return B + F.FILE_STATUS_SIZE;
    case FileOp.Completion:
      putStatus(b, B, body);
      F.setFileSealSeal(b, B + F.FILE_STATUS_SIZE, body.seal);
      F.setFileSealRsvd(b, B + F.FILE_STATUS_SIZE, 0);
      return STATUS_BLOCK_LEN;
    case FileOp.RegisterFile: {
      const p = enc.encode(body.path);
      b.fill(0, B, B + F.FILE_REGISTER_SIZE);
      F.setFileRegisterAccess(b, B, body.access);
      F.setFileRegisterMode(b, B, body.mode);
      F.setFileRegisterPathLen(b, B, p.length);
      b.set(p, B + F.FILE_REGISTER_SIZE);
      return B + F.FILE_REGISTER_SIZE + p.length;
    }
    case FileOp.Read:
      b.fill(0, B, B + F.FILE_READ_SIZE);
      F.setFileReadFileId(b, B, body.fileId);
      F.setFileReadLength(b, B, body.length);
      F.setFileReadOffset(b, B, body.offset);
      F.setFileReadSinkAddr(b, B, body.sinkAddr);
      F.setFileReadSinkRkey(b, B, body.sinkRkey);
      return B + F.FILE_READ_SIZE;
    case FileOp.ReadV: {
      const end = B + F.FILE_READ_V_SIZE + body.entries.length * F.FILE_READ_VENTRY_SIZE;
      b.fill(0, B, end);
      F.setFileReadVFileId(b, B, body.fileId);
      F.setFileReadVCount(b, B, body.entries.length);
      F.setFileReadVSinkAddr(b, B, body.sinkAddr);
      F.setFileReadVSinkRkey(b, B, body.sinkRkey);
      let at = B + F.FILE_READ_V_SIZE;
      for (const x of body.entries) {
        F.setFileReadVEntryOffset(b, at, x.offset);
        F.setFileReadVEntrySinkAddr(b, at, x.sinkAddr);
        F.setFileReadVEntryLength(b, at, x.length);
        at += F.FILE_READ_VENTRY_SIZE;
      }
      return end;
    }
    case FileOp.Write:
      F.setFileWriteFileId(b, B, body.fileId);
      F.setFileWriteLength(b, B, body.length);
      F.setFileWriteOffset(b, B, body.offset);
      return B + F.FILE_WRITE_SIZE;
    case FileOp.WriteV: {
      const end = B + F.FILE_WRITE_V_SIZE + body.entries.length * F.FILE_WRITE_VENTRY_SIZE;
      b.fill(0, B, end);
      F.setFileWriteVFileId(b, B, body.fileId);
      F.setFileWriteVCount(b, B, body.entries.length);
      let at = B + F.FILE_WRITE_V_SIZE;
      for (const x of body.entries) {
        F.setFileWriteVEntryOffset(b, at, x.offset);
        F.setFileWriteVEntryLength(b, at, x.length);
        at += F.FILE_WRITE_VENTRY_SIZE;
      }
      return end;
    }
    case FileOp.Close:
      F.setFileCloseFileId(b, B, body.fileId);
      F.setFileCloseDiscard(b, B, body.discard);
      return B + F.FILE_CLOSE_SIZE;
    case FileOp.List: {
      const p = enc.encode(body.path);
      b.fill(0, B, B + F.FILE_LIST_SIZE);
      F.setFileListCookie(b, B, body.cookie);
      F.setFileListSinkLength(b, B, body.sinkLength);
      F.setFileListSinkAddr(b, B, body.sinkAddr);
      F.setFileListSinkRkey(b, B, body.sinkRkey);
      F.setFileListPathLen(b, B, p.length);
      b.set(p, B + F.FILE_LIST_SIZE);
      return B + F.FILE_LIST_SIZE + p.length;
    }
    default:
      return B;
  }
}

function putStatus(b: Uint8Array, at: number, s: StatusFields): void {
  F.setFileStatusStatus(b, at, s.status);
  F.setFileStatusAux(b, at, s.aux);
  F.setFileStatusValue(b, at, s.value);
}
