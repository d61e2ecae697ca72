// The file service's errors are SabreErrors whose codes CLI users and scripts match on: the
// codes are pinned here so a change to the status table or to the error class shows up.
import { describe, expect, it } from 'vitest';
import { FileError, SabreError } from '../../src/index.js';
import { LocalCode, statusCode } from '../../src/files/status.js';
import { FILE_STATUS, FileStatus } from '../../src/wire/files-spec.js';

const PINNED = [
  'ERR_FILE_SUCCESS', 'ERR_FILE_ACCESS_DENIED', 'ERR_FILE_NOT_AUTHENTICATED', 'ERR_FILE_NOT_FOUND', 'ERR_FILE_EXISTS',
  'ERR_FILE_IS_DIRECTORY', 'ERR_FILE_NOT_DIRECTORY', 'ERR_FILE_PATH_OUTSIDE', 'ERR_FILE_INVALID_PARAMETER',
  'ERR_FILE_LIMIT_EXCEEDED', 'ERR_FILE_TOO_MANY_OPEN_FILES', 'ERR_FILE_INVALID_HANDLE', 'ERR_FILE_READ_ONLY',
  'ERR_FILE_CANCELLED', 'ERR_FILE_IO_ERROR', 'ERR_FILE_CREDIT_OVERRUN', 'ERR_FILE_MALFORMED',
  'ERR_FILE_NO_COMMON_PROVIDER', 'ERR_FILE_SESSION_LIMIT', 'ERR_FILE_NO_SPACE', 'ERR_FILE_LINKED_FILE',
  'ERR_FILE_SHUTTING_DOWN',
];

describe('FileError', () => {
  it('is a SabreError that keeps its wire status and its ERR_FILE_ code', () => {
    const e = FileError.of(FileStatus.NotFound, 'open /x');
    expect(e).toBeInstanceOf(SabreError);
    expect(e).toBeInstanceOf(FileError);
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('FileError');
    expect(e.code).toBe('ERR_FILE_NOT_FOUND');
    expect(e.status).toBe(FileStatus.NotFound);
    const local = new FileError(LocalCode.ConnectionLost, 'gone', undefined, { cause: 'why' });
    expect(local).toBeInstanceOf(SabreError);
    expect(local.status).toBeUndefined();
    expect(local.cause).toBe('why');
  });

  it('codes stay as they were: one per status, and the local ones', () => {
    expect(FILE_STATUS.map((s) => statusCode(s.code))).toEqual(PINNED);
    expect(Object.values(LocalCode)).toEqual(['ERR_FILE_CONNECTION_LOST', 'ERR_FILE_PROTOCOL', 'ERR_FILE_TIMEOUT', 'ERR_FILE_CLOSED']);
  });
});
