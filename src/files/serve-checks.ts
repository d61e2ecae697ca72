// The numeric ServeOptions, checked at serveFiles before anything is opened. A limit that is NaN
// compares false against every count, so a cap given as NaN (or a fraction, a negative, Infinity)
// silently stopped bounding what it names; an absurd one (a billion connections) sized fixed
// allocations by it. Each is an integer in a range, and the first one out of it is refused with
// ERR_INVALID_ARGUMENT naming the option ('sessions.idleEvictMs must be an integer in
// 0..2147483647, not NaN').
//
// Upper bounds: what a server can sensibly hold, not what a test uses. Durations stop at the
// largest setTimeout delay (2^31 − 1 ms, ~24.8 days: longer ones fire at once). RDMA connections
// stop at 1024 (each authenticated one registers ~17 MiB with the default limits; the shared CQ is
// sized by the total). Sizes of one request stop at 16 MiB, what a client accepts
// (client-core.ts LIMIT_RANGES), so a server never announces a limit its clients refuse.
import { MAX_TIMER_MS } from '../core/deadline.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { ServeOptions } from './serve-options.js';

const CONNS = 1024;
const PIPES = 65_536;
const MIB16 = 16 << 20;

type Range = readonly [min: number, max: number];

/** The top-level numeric options' ranges (the CLI's serve flags check theirs against these too). */
export const TOP: Readonly<Record<string, Range>> = {
  port: [0, 65_535],
  maxConnections: [1, CONNS],
  maxConnectionsPerHost: [1, CONNS],
  maxUnauthenticated: [1, CONNS],
  maxUnauthenticatedPerHost: [1, CONNS],
  maxPipes: [1, PIPES],
  maxPipesPerHost: [1, PIPES],
  maxUnauthenticatedPipes: [1, PIPES],
  maxUnauthenticatedPipesPerHost: [1, PIPES],
  minTokenLength: [0, 4096],
  // udp's own range (transport/udp/link.ts); checked here too so it is refused before the pipe listens.
  mtu: [256, 65_507],
  workers: [0, 16],
  dedupMaxBytes: [1, Number.MAX_SAFE_INTEGER],
  dedupMaxTransfers: [1, CONNS],
  maxOpenFilesTotal: [1, Number.MAX_SAFE_INTEGER],
  partSweepAgeMs: [0, Number.MAX_SAFE_INTEGER],
};

const NESTED: Record<'sessions' | 'login' | 'limits', Record<string, Range>> = {
  sessions: {
    maxSessions: [1, PIPES],
    maxSessionsPerHost: [1, PIPES],
    idleEvictMs: [0, MAX_TIMER_MS],
    maxConnectionsPerSession: [1, CONNS],
    maxPendingKeys: [1, CONNS],
    keyTtlMs: [1, MAX_TIMER_MS],
  },
  login: {
    free: [0, 1 << 20],
    baseMs: [0, MAX_TIMER_MS],
    maxMs: [0, MAX_TIMER_MS],
    memoryMs: [0, MAX_TIMER_MS],
    maxSources: [1, 1 << 20],
  },
  limits: {
    credits: [1, 1024],
    maxWriteSize: [1, MIB16],
    maxReadWriteSize: [1, MIB16],
    maxVectors: [1, 128],
    maxOpenFiles: [1, 65_536],
    rwDepth: [1, 1024],
    authTimeoutMs: [1, MAX_TIMER_MS],
  },
};

function check(name: string, v: unknown, [min, max]: Range): void {
  if (v === undefined) return;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    throw new SabreError(ErrorCode.InvalidArgument, `${name} must be an integer in ${min}..${max}, not ${typeof v === 'number' ? String(v) : typeof v}`);
  }
}

/** Throws ERR_INVALID_ARGUMENT naming the first numeric option out of its range. */
export function checkServeOptions(o: ServeOptions): void {
  const top = o as Record<string, unknown>;
  for (const [k, r] of Object.entries(TOP)) check(k, top[k], r);
  for (const [group, ranges] of Object.entries(NESTED)) {
    const g = top[group];
    if (g === undefined) continue;
    if (typeof g !== 'object' || g === null) throw new SabreError(ErrorCode.InvalidArgument, `${group} must be an object, not ${g === null ? 'null' : typeof g}`);
    for (const [k, r] of Object.entries(ranges)) check(`${group}.${k}`, (g as Record<string, unknown>)[k], r);
  }
  // A fixed port puts the tcp device on port + 1 (./server.ts).
  if (o.port === 65_535 && (o.transports ?? ['udp', 'tcp']).includes('tcp')) {
    throw new SabreError(ErrorCode.InvalidArgument, 'port 65535 leaves no port for the tcp device (it listens on port + 1)');
  }
}
