// The wire of the file service (M6): the I/O offload protocol of src/files/. Two wires:
// - the control pipe, a TCP stream of frames (filePipeHdr + body): token proof, resume key,
//   negotiate;
// - the RDMA connection (an rc QP from cm listen/connect on FILE_SERVICE): every Send starts
//   with fileHdr (credits in every header), followed by the opcode's body; completions travel
//   as status blocks (fileHdr ‖ fileStatus ‖ fileSeal) written by RDMA into the client's status
//   area, or as Sends.
// Sources: MS-SMBD §2.2 (credits requested/granted in every header, 3.1.5.1 last-credit rule,
// 3.1.5.8 checks on receipt), MS-SMB2 FSCTL_SRV_REQUEST_RESUME_KEY (a 24-byte resume key),
// RFC 8166 §3.3 (credits bound one connection instance). Big-endian like the rest of sabre.
import { type FieldSpec, type LayoutSpec, codeMap, layout } from './layout.js';
export type { CodeMap, CodeSpec } from './layout.js';

/** cm service number of the file service's RDMA connections ('SBRF'). */
export const FILE_SERVICE = 0x5342_5246;
/** cm service number of the file service's dedup channels ('SBFD'; put/get --dedup, src/files/dedup.ts). */
export const FILE_DEDUP_SERVICE = 0x5342_4644;
export const FILE_VERSION = 1;
/** Largest control-pipe frame body; a longer length field closes the pipe before any read. */
export const FILE_PIPE_MAX_BODY = 1024;
export const FILE_NONCE_LEN = 32;
export const FILE_MAC_LEN = 32;
export const FILE_RESUME_KEY_LEN = 24;
export const FILE_KEY_ID_LEN = 16;
export const FILE_MAX_PATH = 4096;
/** Bytes of one status slot in the client's status area (a status block is 40). */
export const FILE_SLOT_BYTES = 64;

/** Control-pipe frame types. */
export const FILE_PIPE_TYPES = [
  { code: 1, name: 'Hello', meaning: 'C→S filePipeHello: the client nonce' },
  { code: 2, name: 'Challenge', meaning: 'S→C filePipeNonce: the server nonce' },
  { code: 3, name: 'Proof', meaning: 'C→S filePipeMac: HMAC-SHA256(token, "sabre-files/1 client" ‖ Nc ‖ Ns)' },
  { code: 4, name: 'Welcome', meaning: 'S→C filePipeWelcome: status and HMAC-SHA256(token, "sabre-files/1 server" ‖ Nc ‖ Ns)' },
  { code: 5, name: 'ResumeKeyRequest', meaning: 'C→S, empty body: ask for the session\'s resume key' },
  { code: 6, name: 'ResumeKeyResponse', meaning: 'S→C filePipeResumeKey: the 24-byte key naming this session' },
  { code: 7, name: 'NegotiateRequest', meaning: 'C→S filePipeNegotiateReq: resume key and the providers the client has' },
  { code: 8, name: 'NegotiateResponse', meaning: 'S→C filePipeNegotiateResp: the common providers, their ports, a key id' },
  { code: 9, name: 'Status', meaning: 'S→C filePipeStatus: a refusal; the server closes the pipe after it' },
] as const;
export const FilePipeType = codeMap(FILE_PIPE_TYPES);

/** Provider bits of the negotiate messages. */
export const FILE_PROVIDERS = [
  { code: 0x01, name: 'udp', meaning: 'RDMAP/DDP over sabre\'s reliable UDP (M5); port in udpPort' },
  { code: 0x02, name: 'tcp', meaning: 'iWARP over TCP (MPA); port in tcpPort' },
  { code: 0x04, name: 'inproc', meaning: 'same process; the device id follows the body as UTF-8' },
] as const;
export const FileProvider = codeMap(FILE_PROVIDERS);

/** RDMA-connection opcodes (fileHdr.opcode). */
export const FILE_OPCODES = [
  { code: 1, name: 'AuthenticateRequest', meaning: 'C→S fileAuthReq; the one message a client may send before any grant' },
  { code: 2, name: 'AuthenticateResponse', meaning: 'S→C fileAuthResp: negotiated limits and the server\'s proof' },
  { code: 3, name: 'StatusResponse', meaning: 'S→C fileStatus by Send: the end of authentication, the answer to a retiring Credit, or a terminal refusal (flag Terminate)' },
  { code: 4, name: 'Completion', meaning: 'S→C status block (fileHdr ‖ fileStatus ‖ fileSeal) by RDMA Write (polling) or Write with Immediate = slot (Interrupt flag); info = the opcode completed' },
  { code: 5, name: 'RegisterFile', meaning: 'C→S fileRegister + path: open a file; completion aux = file id, value = size' },
  { code: 6, name: 'Read', meaning: 'C→S fileRead: the server RDMA-writes the bytes to the sink; completion value = bytes' },
  { code: 7, name: 'ReadV', meaning: 'C→S fileReadV + fileReadVEntry×count; with Collapse the sink is one contiguous run. Entries are read in order and the first short one (end of file) ends the request: the Completion\'s value fills the entries in order' },
  { code: 8, name: 'Write', meaning: 'C→S fileWrite + the data (a Send); completion value = bytes' },
  { code: 9, name: 'WriteV', meaning: 'C→S fileWriteV + fileWriteVEntry×count + the data collapsed into the one Send; needs the Collapse flag' },
  { code: 10, name: 'Close', meaning: 'C→S fileClose: completes once the file is closed (and, for Replace, renamed into place or, with discard, abandoned)' },
  { code: 11, name: 'Cancel', meaning: 'C→S, no body, info = request id to cancel; no answer of its own: the target completes with Cancelled or its result' },
  { code: 12, name: 'List', meaning: 'C→S fileList + path: one page of fileDirEntry records RDMA-written to the sink; completion value = bytes, aux = next cookie (0: end)' },
  { code: 13, name: 'Credit', meaning: 'C→S, no body: info 1 retires one credit (answered by a StatusResponse), info 0 only carries the header\'s grant' },
  { code: 14, name: 'DeltaCredit', meaning: 'S→C, no body: info = signed credit delta; −N asks the client to retire N credits with N Credit messages' },
  { code: 15, name: 'InterruptRequest', meaning: 'C→S, no body, info = request id: a polling client asks to be told by Send when it completes' },
  { code: 16, name: 'InterruptResponse', meaning: 'S→C fileStatus by Send, info = request id: its completion (status NotFound: the request is no longer in progress, its block is in the slot)' },
] as const;
export const FileOp = codeMap(FILE_OPCODES);

/** fileHdr.flags bits. */
export const FILE_FLAGS = [
  { code: 0x01, name: 'Interrupt', meaning: 'request: deliver the completion by RDMA Write with Immediate (a receive completion at the client); clear = polling (plain RDMA Write)' },
  { code: 0x02, name: 'Collapse', meaning: 'ReadV: the sink is one contiguous run; WriteV: the vector\'s data is gathered into this Send' },
  { code: 0x80, name: 'Terminate', meaning: 'StatusResponse: the server closes the connection after this message' },
] as const;
export const FileFlag = codeMap(FILE_FLAGS);

/** fileRegister.access bits. */
export const FILE_ACCESS = [
  { code: 0x01, name: 'Read', meaning: 'open for Read/ReadV' },
  { code: 0x02, name: 'Write', meaning: 'open for Write/WriteV' },
  { code: 0x04, name: 'Create', meaning: 'create the file when missing' },
  { code: 0x08, name: 'Truncate', meaning: 'truncate to 0 on open' },
  { code: 0x10, name: 'Exclusive', meaning: 'with Create: fail with Exists when the name exists' },
  { code: 0x20, name: 'Replace', meaning: 'write a temporary file next to the name, rename it into place on Close (never a truncated file under the name)' },
  { code: 0x40, name: 'Fsync', meaning: 'with Replace: fsync the file before the rename and the directory after it' },
] as const;
export const FileAccess = codeMap(FILE_ACCESS);

/** Status codes (filePipeStatus, fileStatus.status, fileAuthResp.status). */
export const FILE_STATUS = [
  { code: 0, name: 'Success', meaning: 'done' },
  { code: 1, name: 'AccessDenied', meaning: 'wrong token, wrong, expired or replayed key' },
  { code: 2, name: 'NotAuthenticated', meaning: 'a request before authentication (the connection is terminated)' },
  { code: 3, name: 'NotFound', meaning: 'no such file or directory' },
  { code: 4, name: 'Exists', meaning: 'Create + Exclusive on an existing name' },
  { code: 5, name: 'IsDirectory', meaning: 'a file operation on a directory' },
  { code: 6, name: 'NotDirectory', meaning: 'List on a file, or a file used as a directory in a path' },
  { code: 7, name: 'PathOutside', meaning: 'the path leaves the served directory (.., absolute, a symbolic link out, NUL)' },
  { code: 8, name: 'InvalidParameter', meaning: 'a field out of range or inconsistent with the message' },
  { code: 9, name: 'LimitExceeded', meaning: 'longer or more vectored than the negotiated limits' },
  { code: 10, name: 'TooManyOpenFiles', meaning: 'the connection holds the negotiated maximum of open files, or the server its maximum across connections' },
  { code: 11, name: 'InvalidHandle', meaning: 'no such file id on this connection, or not opened for this access' },
  { code: 12, name: 'ReadOnly', meaning: 'the server is read-only' },
  { code: 13, name: 'Cancelled', meaning: 'cancelled by the client' },
  { code: 14, name: 'IoError', meaning: 'the server\'s file system failed the operation' },
  { code: 15, name: 'CreditOverrun', meaning: 'a message without a credit (the connection is terminated)' },
  { code: 16, name: 'Malformed', meaning: 'a message that does not parse' },
  { code: 17, name: 'NoCommonProvider', meaning: 'negotiate: no provider both sides have' },
  { code: 18, name: 'SessionLimit', meaning: 'too many sessions, connections or pending keys' },
  { code: 19, name: 'NoSpace', meaning: 'the server\'s file system is full' },
  { code: 20, name: 'LinkedFile', meaning: 'the file has more than one hard link (refused: it may alias a file outside)' },
  { code: 21, name: 'ShuttingDown', meaning: 'the server is closing' },
] as const;
export const FileStatus = codeMap(FILE_STATUS);

/**
 * Why the server's cm listener rejects an RDMA connect on FILE_SERVICE, before it makes a QP for
 * it: the reason goes verbatim (udp / inproc: the REJ's reason; tcp: the MPA reject's sabre
 * block), so a client that gets one of these back fails with the row's status (a FileError, not
 * a lost connection); any other reason is a connect that failed.
 */
export const FILE_CM_REJECTS = [
  {
    bound: 'hostTotal', reason: 'too many connections from your host (maxConnectionsPerHost)', status: FileStatus.SessionLimit,
    meaning: 'the source host holds maxConnectionsPerHost RDMA connections, all authenticated (an unauthenticated one of the host is closed for a newcomer instead)',
  },
  {
    bound: 'total', reason: 'too many connections to the server (maxConnections)', status: FileStatus.SessionLimit,
    meaning: 'the server holds maxConnections RDMA connections, all authenticated (an unauthenticated one is closed for a newcomer instead)',
  },
] as const;

/** The cm reject of an RDMA connect refused under `bound` (FILE_CM_REJECTS' row for it). */
export function cmRejectFor(bound: RefusalBound): (typeof FILE_CM_REJECTS)[number] {
  return FILE_CM_REJECTS.find((r) => r.bound === bound)!;
}

/**
 * Why an RDMA connection (codes 1-4) or a control pipe (5-8) was closed before it authenticated,
 * to make room for a newer one under the server's pre-authentication bounds (its flood defence):
 * the server answers the connection's AuthenticateRequest with StatusResponse(SessionLimit,
 * Terminate) whose `aux` is the code, or writes the pipe Status(SessionLimit) whose `why` is the
 * code, and the client fails with ERR_FILE_SESSION_LIMIT "the server refused: <name>; closed
 * before it authenticated, for a newer connection". `name` is the reason, verbatim.
 */
export const FILE_EVICTIONS = [
  { code: 1, on: 'rdma', bound: 'hostPending', name: 'too many unauthenticated connections from your host (maxUnauthenticatedPerHost)', meaning: 'the source host held maxUnauthenticatedPerHost connections not yet authenticated: its oldest was closed for its newest' },
  { code: 2, on: 'rdma', bound: 'hostTotal', name: cmRejectFor('hostTotal').reason, meaning: 'the source host held maxConnectionsPerHost connections: its oldest unauthenticated one was closed for its newest' },
  { code: 3, on: 'rdma', bound: 'pending', name: 'too many unauthenticated connections to the server (maxUnauthenticated)', meaning: 'the server held maxUnauthenticated connections not yet authenticated: the oldest of the source holding the most was closed for a newer one' },
  { code: 4, on: 'rdma', bound: 'total', name: cmRejectFor('total').reason, meaning: 'the server held maxConnections connections: the oldest unauthenticated one of the source holding the most was closed for a newer one' },
  { code: 5, on: 'pipe', bound: 'hostPending', name: 'too many unauthenticated control pipes from your host (maxUnauthenticatedPipesPerHost)', meaning: 'the source host held maxUnauthenticatedPipesPerHost pipes not yet authenticated: its oldest was closed for its newest' },
  { code: 6, on: 'pipe', bound: 'hostTotal', name: 'too many control pipes from your host (maxPipesPerHost)', meaning: 'the source host held maxPipesPerHost pipes: its oldest unauthenticated one was closed for its newest' },
  { code: 7, on: 'pipe', bound: 'pending', name: 'too many unauthenticated control pipes to the server (maxUnauthenticatedPipes)', meaning: 'the server held maxUnauthenticatedPipes pipes not yet authenticated: the oldest of the source holding the most was closed for a newer one' },
  { code: 8, on: 'pipe', bound: 'total', name: 'too many control pipes to the server (maxPipes)', meaning: 'the server held maxPipes pipes: the oldest unauthenticated one of the source holding the most was closed for a newer one' },
] as const;

/**
 * Why a control pipe was refused at accept (its Status `why`, with SessionLimit): the bound whose
 * pipes are all authenticated, so none could be closed for it. Codes go on from FILE_EVICTIONS'.
 */
export const FILE_PIPE_REFUSALS = [
  { code: 9, bound: 'hostTotal', name: 'too many control pipes from your host, all logged in (maxPipesPerHost)', meaning: 'the source host holds maxPipesPerHost pipes, all authenticated: the new one is refused before a byte of it is read' },
  { code: 10, bound: 'total', name: 'too many control pipes to the server, all logged in (maxPipes)', meaning: 'the server holds maxPipes pipes, all authenticated: the new one is refused before a byte of it is read' },
] as const;

/** The bound a refusal at accept names (FILE_PIPE_REFUSALS' `bound`; FILE_CM_REJECTS' for an RDMA connection). */
export type RefusalBound = (typeof FILE_PIPE_REFUSALS)[number]['bound'];

/** The FILE_PIPE_REFUSALS row a pipe Status's `why` names (undefined: none of its codes). */
export function pipeRefusalNamed(code: number): (typeof FILE_PIPE_REFUSALS)[number] | undefined {
  return FILE_PIPE_REFUSALS.find((r) => r.code === code);
}

/** Which pre-authentication bound an eviction was made under (FILE_EVICTIONS' `bound`). */
export type EvictionBound = (typeof FILE_EVICTIONS)[number]['bound'];

/** The FILE_EVICTIONS code an RDMA connection (`rdma`) or a control pipe closed under `bound` is told. */
export function evictionCode(on: 'rdma' | 'pipe', bound: EvictionBound): number {
  return FILE_EVICTIONS.find((e) => e.on === on && e.bound === bound)!.code;
}

/** The FILE_EVICTIONS row a refusal's `code` names for `on` (undefined: none of its codes). */
export function evictionNamed(on: 'rdma' | 'pipe', code: number): (typeof FILE_EVICTIONS)[number] | undefined {
  return FILE_EVICTIONS.find((e) => e.on === on && e.code === code);
}

const fileLayout = <F extends string>(l: Omit<LayoutSpec<F>, 'byteOrder' | 'sabre'>): LayoutSpec<F> => layout({ ...l, byteOrder: 'big-endian', sabre: true });
const u8 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 1, type: 'u8', meaning, ref: 'sabre M6' });
const u16 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 2, type: 'u16', meaning, ref: 'sabre M6' });
const u32 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 4, type: 'u32', meaning, ref: 'sabre M6' });
const u64 = (offset: number, meaning: string): FieldSpec => ({ offset, size: 8, type: 'u64', meaning, ref: 'sabre M6' });
const bytes = (offset: number, size: number, meaning: string): FieldSpec => ({ offset, size, type: 'bytes', meaning, ref: 'sabre M6' });

export const FILE_PIPE_HDR = fileLayout({
  name: 'filePipeHdr', title: 'File service: control-pipe frame header', size: 8, ref: 'sabre M6',
  fields: {
    length: u32(0, `bytes of body after this header (at most ${FILE_PIPE_MAX_BODY}; more closes the pipe unread)`),
    type: u8(4, 'frame type (pipe type table)'),
    version: u8(5, `protocol version, ${FILE_VERSION}`),
    rsvd: u16(6, '0'),
  },
  tail: 'the body of the type',
});
export const FILE_PIPE_NONCE = fileLayout({
  name: 'filePipeNonce', title: 'File service pipe: Hello / Challenge body', size: 32, ref: 'sabre M6',
  fields: { nonce: bytes(0, 32, 'fresh random bytes of the sender (Nc in Hello, Ns in Challenge)') },
});
export const FILE_PIPE_MAC = fileLayout({
  name: 'filePipeMac', title: 'File service pipe: Proof body', size: 32, ref: 'sabre M6',
  fields: { mac: bytes(0, 32, 'HMAC-SHA256(token, "sabre-files/1 client" ‖ Nc ‖ Ns): the token never crosses the wire') },
});
export const FILE_PIPE_WELCOME = fileLayout({
  name: 'filePipeWelcome', title: 'File service pipe: Welcome body', size: 36, ref: 'sabre M6',
  fields: {
    status: u32(0, 'Success, or AccessDenied (the pipe is closed after it)'),
    mac: bytes(4, 32, 'HMAC-SHA256(token, "sabre-files/1 server" ‖ Nc ‖ Ns): the server proves the token too (zero on refusal)'),
  },
});
export const FILE_PIPE_RESUME_KEY = fileLayout({
  name: 'filePipeResumeKey', title: 'File service pipe: ResumeKeyResponse body', size: 24, ref: 'sabre M6, MS-SMB2 SRV_REQUEST_RESUME_KEY',
  fields: { resumeKey: bytes(0, 24, 'random; names the session; its RDMA connections quote it to be bound to it') },
});
export const FILE_PIPE_NEGOTIATE_REQ = fileLayout({
  name: 'filePipeNegotiateReq', title: 'File service pipe: NegotiateRequest body', size: 28, ref: 'sabre M6',
  fields: {
    resumeKey: bytes(0, 24, 'the key from ResumeKeyResponse'),
    providers: u8(24, 'provider bits the client can use'),
    rsvd: bytes(25, 3, '0'),
  },
});
export const FILE_PIPE_NEGOTIATE_RESP = fileLayout({
  name: 'filePipeNegotiateResp', title: 'File service pipe: NegotiateResponse body', size: 28, ref: 'sabre M6',
  fields: {
    status: u32(0, 'Success or NoCommonProvider / SessionLimit'),
    providers: u8(4, 'provider bits both sides have (the minimal common list)'),
    inprocIdLen: u8(5, 'bytes of the inproc device id that follow the body (0 without inproc)'),
    udpPort: u16(6, 'port of the server\'s udp device (host: the pipe\'s)'),
    tcpPort: u16(8, 'port of the server\'s tcp device'),
    rsvd: u16(10, '0'),
    keyId: bytes(12, 16, 'names a single-use authentication key K_auth = HMAC-SHA256(K_session, "auth" ‖ keyId), K_session = HMAC-SHA256(token, "sabre-files/1 session" ‖ Nc ‖ Ns); valid 30 s'),
  },
  tail: 'inprocIdLen bytes of UTF-8: the inproc device id',
});
export const FILE_PIPE_STATUS = fileLayout({
  name: 'filePipeStatus', title: 'File service pipe: Status body', size: 8, ref: 'sabre M6',
  fields: {
    status: u32(0, 'why the server refuses; it closes the pipe next'),
    why: u32(4, 'with SessionLimit, the bound: a pipe refused at accept (pipe refusal table, 9-10), or one not yet authenticated closed for a newer one (eviction table, 5-8); else 0'),
  },
});

export const FILE_HDR = fileLayout({
  name: 'fileHdr', title: 'File service: the header of every RDMA-connection message', size: 16, ref: 'sabre M6, MS-SMBD §2.2.3',
  fields: {
    opcode: u8(0, 'opcode (opcode table)'),
    flags: u8(1, 'Interrupt 0x01, Collapse 0x02, Terminate 0x80'),
    creditsRequested: u16(2, 'credits the sender wants to hold (its target), as MS-SMBD CreditsRequested'),
    creditsGranted: u16(4, 'new credits granted to the receiver by this message (each backed by a posted receive)'),
    slot: u16(6, 'request: the status slot its completion goes to; completion: the slot'),
    requestId: u32(8, 'request: chosen by the client, nonzero, unique among its outstanding requests; answers echo it'),
    info: u32(12, 'per opcode: DeltaCredit the signed delta; Credit 1 = retire; Cancel / InterruptRequest / InterruptResponse the target request id; Completion the opcode completed'),
  },
  tail: 'the opcode\'s body',
});
export const FILE_AUTH_REQ = fileLayout({
  name: 'fileAuthReq', title: 'File service: AuthenticateRequest body', size: 108, ref: 'sabre M6',
  fields: {
    resumeKey: bytes(0, 24, 'the session\'s resume key'),
    keyId: bytes(24, 16, 'the key id of a NegotiateResponse of that session'),
    nonce: bytes(40, 16, 'client nonce of this connection'),
    mac: bytes(56, 32, 'HMAC-SHA256(K_auth, "authenticate" ‖ resumeKey ‖ keyId ‖ nonce ‖ bytes 88..107 of this body)'),
    statusAddr: u64(88, 'the client\'s status area (registered with RemoteWrite)'),
    statusRkey: u32(96, 'its rkey'),
    statusSlots: u16(100, `slots of ${FILE_SLOT_BYTES} bytes in it`),
    rsvd: u16(102, '0'),
    maxReceiveSize: u32(104, 'the client\'s receive buffer size'),
  },
});
export const FILE_AUTH_RESP = fileLayout({
  name: 'fileAuthResp', title: 'File service: AuthenticateResponse body', size: 56, ref: 'sabre M6',
  fields: {
    status: u32(0, 'Success'),
    maxReceiveSize: u32(4, 'the server\'s receive buffer size (a message is at most this long)'),
    maxReadWriteSize: u32(8, 'largest Read/ReadV/List transfer'),
    maxWriteSize: u32(12, 'largest Write/WriteV data'),
    maxVectors: u16(16, 'most entries in a ReadV/WriteV'),
    maxOpenFiles: u16(18, 'most files open at once on this connection'),
    rwDepth: u16(20, 'RDMA transfers (reads being answered) in flight at once'),
    creditsMax: u16(22, 'the most credits the server will grant'),
    mac: bytes(24, 32, 'HMAC-SHA256(K_auth, "authenticated" ‖ nonce ‖ bytes 0..23 of this body): the server knew the key'),
  },
});
export const FILE_STATUS_BODY = fileLayout({
  name: 'fileStatus', title: 'File service: status body (StatusResponse, InterruptResponse, and inside a status block)', size: 16, ref: 'sabre M6',
  fields: {
    status: u32(0, 'status code'),
    aux: u32(4, 'RegisterFile: file id; List: next cookie; StatusResponse(SessionLimit, Terminate) before authentication: why it was closed (eviction table); else 0'),
    value: u64(8, 'bytes transferred; RegisterFile: the file size'),
  },
});
export const FILE_SEAL = fileLayout({
  name: 'fileSeal', title: 'File service: status block trailer', size: 8, ref: 'sabre M6',
  fields: {
    seal: u32(0, 'the requestId again, written last: a polling client trusts the block once seal = its requestId'),
    rsvd: u32(4, '0'),
  },
});
export const FILE_REGISTER = fileLayout({
  name: 'fileRegister', title: 'File service: RegisterFile body', size: 12, ref: 'sabre M6',
  fields: {
    access: u32(0, 'access bits'),
    mode: u32(4, 'permission bits for a created file (masked with 0o666)'),
    pathLen: u16(8, `bytes of path that follow (1..${FILE_MAX_PATH})`),
    rsvd: u16(10, '0'),
  },
  tail: 'pathLen bytes of UTF-8: the path relative to the served directory, "/" separated',
});
export const FILE_READ = fileLayout({
  name: 'fileRead', title: 'File service: Read body', size: 32, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    length: u32(4, 'bytes to read (at most maxReadWriteSize)'),
    offset: u64(8, 'file offset (< 2^53)'),
    sinkAddr: u64(16, 'where the server RDMA-writes the bytes'),
    sinkRkey: u32(24, 'rkey of the sink'),
    rsvd: u32(28, '0'),
  },
});
export const FILE_READ_V = fileLayout({
  name: 'fileReadV', title: 'File service: ReadV body', size: 24, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    count: u16(4, 'entries that follow (1..maxVectors)'),
    rsvd: u16(6, '0'),
    sinkAddr: u64(8, 'Collapse: where the run starts; else 0'),
    sinkRkey: u32(16, 'rkey of every sink'),
    rsvd2: u32(20, '0'),
  },
  tail: 'count fileReadVEntry records',
});
export const FILE_READ_V_ENTRY = fileLayout({
  name: 'fileReadVEntry', title: 'File service: ReadV entry', size: 24, ref: 'sabre M6',
  fields: {
    offset: u64(0, 'file offset'),
    sinkAddr: u64(8, 'without Collapse: this entry\'s sink; with Collapse: 0 (entries follow each other from the body\'s sinkAddr)'),
    length: u32(16, 'bytes'),
    rsvd: u32(20, '0'),
  },
});
export const FILE_WRITE = fileLayout({
  name: 'fileWrite', title: 'File service: Write body', size: 16, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    length: u32(4, 'bytes of data that follow (at most maxWriteSize; exactly the rest of the message)'),
    offset: u64(8, 'file offset'),
  },
  tail: 'length bytes of data',
});
export const FILE_WRITE_V = fileLayout({
  name: 'fileWriteV', title: 'File service: WriteV body (Collapse flag set)', size: 8, ref: 'sabre M6',
  fields: {
    fileId: u32(0, 'from RegisterFile'),
    count: u16(4, 'entries that follow (1..maxVectors)'),
    rsvd: u16(6, '0'),
  },
  tail: 'count fileWriteVEntry records, then the entries\' data back to back (the rest of the message, exactly the sum of their lengths)',
});
export const FILE_WRITE_V_ENTRY = fileLayout({
  name: 'fileWriteVEntry', title: 'File service: WriteV entry', size: 16, ref: 'sabre M6',
  fields: {
    offset: u64(0, 'file offset'),
    length: u32(8, 'bytes'),
    rsvd: u32(12, '0'),
  },
});
export const FILE_CLOSE = fileLayout({
  name: 'fileClose', title: 'File service: Close body', size: 8, ref: 'sabre M6',
  fields: { fileId: u32(0, 'from RegisterFile'), discard: u32(4, '1: a Replace file is abandoned (its temporary unlinked, the name untouched); 0: closed normally') },
});
export const FILE_LIST = fileLayout({
  name: 'fileList', title: 'File service: List body', size: 24, ref: 'sabre M6',
  fields: {
    cookie: u32(0, '0 for the first page, else the aux of the previous page\'s completion'),
    sinkLength: u32(4, 'bytes the sink holds (at most maxReadWriteSize)'),
    sinkAddr: u64(8, 'where the page is RDMA-written'),
    sinkRkey: u32(16, 'its rkey'),
    pathLen: u16(20, 'bytes of path that follow (0: the served directory itself)'),
    rsvd: u16(22, '0'),
  },
  tail: 'pathLen bytes of UTF-8: the directory',
});
export const FILE_DIR_ENTRY = fileLayout({
  name: 'fileDirEntry', title: 'File service: one directory entry in a List page', size: 24, ref: 'sabre M6',
  fields: {
    type: u8(0, '1 file, 2 directory, 3 symbolic link, 0 other'),
    rsvd: u8(1, '0'),
    nameLen: u16(2, 'bytes of name that follow'),
    mode: u32(4, 'permission bits'),
    size: u64(8, 'bytes (files)'),
    mtimeMs: u64(16, 'modification time, ms since 1970'),
  },
  tail: 'nameLen bytes of UTF-8, then zero padding to a multiple of 8',
});

/** File-service layouts, in document order (docs only: the data plane never parses them). */
export const FILE_LAYOUTS: readonly LayoutSpec[] = [
  FILE_PIPE_HDR, FILE_PIPE_NONCE, FILE_PIPE_MAC, FILE_PIPE_WELCOME, FILE_PIPE_RESUME_KEY, FILE_PIPE_NEGOTIATE_REQ, FILE_PIPE_NEGOTIATE_RESP, FILE_PIPE_STATUS,
  FILE_HDR, FILE_AUTH_REQ, FILE_AUTH_RESP, FILE_STATUS_BODY, FILE_SEAL, FILE_REGISTER, FILE_READ, FILE_READ_V, FILE_READ_V_ENTRY,
  FILE_WRITE, FILE_WRITE_V, FILE_WRITE_V_ENTRY, FILE_CLOSE, FILE_LIST, FILE_DIR_ENTRY,
];
// File service (M6) — end
