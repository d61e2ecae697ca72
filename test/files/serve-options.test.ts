// Every numeric ServeOptions value is checked at serveFiles (src/files/serve-checks.ts). Before,
// only dedupMaxBytes, dedupMaxTransfers and maxOpenFilesTotal were: a NaN cap compares false
// against every count (sessions.maxSessionsPerHost: NaN let one host take every session), a
// negative or fractional one misbehaves the same way, and an absurd one sized allocations by it.
// Each bad value is refused with ERR_INVALID_ARGUMENT naming the option, before anything listens.
import fs from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { type FileServer, serveFiles, type ServeOptions } from '../../src/index.js';
import { tempDir } from './helpers.js';

const dir = tempDir('serve-options');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Option (dotted for a nested one) → a value just past its range, besides the common bad ones. */
const OPTIONS: Record<string, number> = {
  port: 65_536,
  maxConnections: 1_000_000,
  maxConnectionsPerHost: 1_000_000,
  maxUnauthenticated: 1_000_000,
  maxUnauthenticatedPerHost: 1_000_000,
  maxPipes: 10_000_000,
  maxPipesPerHost: 10_000_000,
  maxUnauthenticatedPipes: 10_000_000,
  maxUnauthenticatedPipesPerHost: 10_000_000,
  minTokenLength: 1_000_000,
  mtu: 70_000,
  workers: 17,
  dedupMaxBytes: 2 ** 53,
  dedupMaxTransfers: 1_000_000,
  maxOpenFilesTotal: 2 ** 53,
  partSweepAgeMs: 2 ** 53,
  'sessions.maxSessions': 10_000_000,
  'sessions.maxSessionsPerHost': 10_000_000,
  'sessions.idleEvictMs': 2 ** 31,
  'sessions.maxConnectionsPerSession': 1_000_000,
  'sessions.maxPendingKeys': 1_000_000,
  'sessions.keyTtlMs': 2 ** 31,
  'login.free': 2 ** 31,
  'login.baseMs': 2 ** 31,
  'login.maxMs': 2 ** 31,
  'login.memoryMs': 2 ** 31,
  'login.maxSources': 2 ** 31,
  'limits.credits': 1_000_000,
  'limits.maxWriteSize': (16 << 20) + 1,
  'limits.maxReadWriteSize': (16 << 20) + 1,
  'limits.maxVectors': 129,
  'limits.maxOpenFiles': 1_000_000,
  'limits.rwDepth': 1_000_000,
  'limits.authTimeoutMs': 2 ** 31,
};

function withOption(name: string, v: unknown): ServeOptions {
  const [a, b] = name.split('.') as [string, string | undefined];
  const o: Record<string, unknown> = { token: 'serve-options-token-0123456789', transports: ['inproc'] };
  o[a] = b === undefined ? v : { [b]: v };
  return o as ServeOptions;
}

/** serveFiles' refusal, or 'served' (the server closed again) when it took the value. */
async function refusal(o: ServeOptions): Promise<unknown> {
  let srv: FileServer | undefined;
  try {
    srv = await serveFiles(dir, o);
    return 'served';
  } catch (e) {
    return e;
  } finally {
    await srv?.close();
  }
}

const cases: [string, unknown][] = [];
for (const [name, tooBig] of Object.entries(OPTIONS)) for (const v of [Number.NaN, -1, 2.5, Infinity, tooBig, '8']) cases.push([name, v]);

describe('serveFiles: numeric options out of range → ERR_INVALID_ARGUMENT naming the option', () => {
  it.each(cases)('%s = %s', async (name, v) => {
    const e = await refusal(withOption(name, v));
    expect(e).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(`${name} must be`) });
  });

  it('a cap of 0 is refused where 0 would refuse everything (or bound nothing)', async () => {
    for (const name of ['maxConnections', 'maxConnectionsPerHost', 'sessions.maxSessionsPerHost', 'sessions.keyTtlMs', 'limits.credits', 'limits.maxVectors']) {
      expect(await refusal(withOption(name, 0)), name).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(name) });
    }
  });

  it('a nested group that is not an object is refused; a fixed port of 65535 with tcp (which takes port + 1) is refused', async () => {
    expect(await refusal(withOption('sessions', 5))).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('sessions must be an object') });
    expect(await refusal({ transports: ['tcp'], port: 65_535 })).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('65535') });
  });

  it('values in range are taken (0 where it means none: idleEvictMs, minTokenLength, workers, login.free)', async () => {
    const o: ServeOptions = {
      transports: ['inproc'], maxConnections: 8, maxConnectionsPerHost: 2, maxUnauthenticated: 4, maxUnauthenticatedPerHost: 1, maxPipes: 16, maxPipesPerHost: 4,
      maxUnauthenticatedPipes: 8, maxUnauthenticatedPipesPerHost: 2, minTokenLength: 0, workers: 0, dedupMaxBytes: 1 << 20, dedupMaxTransfers: 2, maxOpenFilesTotal: 32,
      sessions: { maxSessions: 4, maxSessionsPerHost: 2, idleEvictMs: 0, maxConnectionsPerSession: 1, maxPendingKeys: 1, keyTtlMs: 1000 },
      login: { free: 0, baseMs: 10, maxMs: 20, memoryMs: 1000, maxSources: 2 },
      limits: { credits: 2, maxWriteSize: 4096, maxReadWriteSize: 16 << 20, maxVectors: 128, maxOpenFiles: 2, rwDepth: 1, authTimeoutMs: 1000 },
    };
    expect(await refusal(o)).toBe('served');
  });
});
