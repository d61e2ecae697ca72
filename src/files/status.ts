// File-service statuses as the API reports them: a FileError carries the wire status and a
// stable string code derived from its name in the one status table (src/wire/spec.ts), e.g.
// NotFound → 'ERR_FILE_NOT_FOUND'. Local failures (the connection or the pipe went away) use
// the codes below, which have no wire status. A FileError is a SabreError: one instanceof
// catches every failure of sabre, and `code` tells the file service's from the rest.
import { type FileErrorCodeValue, SabreError } from '../core/errors.js';
import { FILE_STATUS } from '../wire/files-spec.js';

export const statusName = (s: number): string => FILE_STATUS.find((x) => x.code === s)?.name ?? `status ${s}`;
/** What the status means, for a person: its row's meaning in the status table. */
export const statusText = (s: number): string => FILE_STATUS.find((x) => x.code === s)?.meaning ?? `status ${s}`;

/** A status the table has (a peer's word checked before it names an error). */
export const isFileStatus = (n: unknown): n is number => FILE_STATUS.some((x) => x.code === n);

const snake = (n: string): string => n.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();

/** 'ERR_FILE_NOT_FOUND' for FileStatus.NotFound. */
export const statusCode = (s: number): FileErrorCodeValue => `ERR_FILE_${snake(statusName(s).replace(/ /g, '_'))}`;

/** Codes of failures that are not a status from the server. */
export const LocalCode = {
  /** The control pipe or the RDMA connection is gone (server killed, network down, closed). */
  ConnectionLost: 'ERR_FILE_CONNECTION_LOST',
  /** The server broke the protocol (a malformed answer, an overrun of our credits). */
  ProtocolError: 'ERR_FILE_PROTOCOL',
  /** No answer in time. */
  Timeout: 'ERR_FILE_TIMEOUT',
  /** The client was closed. */
  Closed: 'ERR_FILE_CLOSED',
} as const;

export class FileError extends SabreError {
  /** Stable: 'ERR_FILE_…'. */
  declare readonly code: FileErrorCodeValue;
  /** The wire status, when the server said it. */
  readonly status: number | undefined;
  constructor(code: FileErrorCodeValue, message: string, status?: number, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'FileError';
    this.status = status;
  }

  static of(status: number, what: string): FileError {
    return new FileError(statusCode(status), `${what}: ${statusText(status)}`, status);
  }
}
