// The provider registry: openDevice's transport lookup, the option checks each transport owns,
// and the one table of who enforces each limit (every key of DeviceLimits has an owner).
import { describe, expect, it } from 'vitest';
import { code } from './error-code.js';
import { ErrorCode, SabreError } from '../../src/core/errors.js';
import { providerFor, registerProvider, splitLimits } from '../../src/nic/providers.js';
import type { DeviceLimits } from '../../src/verbs/types.js';

/** Typed as a record over DeviceLimits: a limit added to the public type must be added here. */
const EVERY_LIMIT: Record<keyof DeviceLimits, number> = {
  maxOooEntries: 1, maxOooBytes: 1, maxSrdFlows: 1, maxSrdFlowsPerPeer: 1, maxIrd: 1, maxAnswerBytes: 1, maxQpAnswerBytes: 1,
  maxContexts: 1, maxContextsPerHost: 1, unownedContextMs: 1,
  maxConnections: 1, maxConnectionsPerHost: 1, handshakeTimeoutMs: 1, maxQueuedBytes: 1,
};


describe('transport providers', () => {
  it('finds inproc, udp and tcp; an unknown transport is ERR_INVALID_ARGUMENT; a name registers once', () => {
    for (const t of ['inproc', 'udp', 'tcp']) expect(providerFor(t).name).toBe(t);
    expect(code(() => providerFor('rdma'))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => providerFor(undefined))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => registerProvider(providerFor('udp')))).toBe(ErrorCode.InvalidArgument);
  });

  it('every limit of DeviceLimits has exactly one owner: the engine or one transport', () => {
    for (const t of ['inproc', 'udp', 'tcp']) {
      const p = providerFor(t);
      const { engine, link } = splitLimits(EVERY_LIMIT, p);
      // The engine's go to the engine on every transport; a transport gets only its own.
      expect(Object.keys(engine).sort()).toEqual(['maxAnswerBytes', 'maxIrd', 'maxOooBytes', 'maxOooEntries', 'maxQpAnswerBytes', 'maxSrdFlows', 'maxSrdFlowsPerPeer']);
      expect(Object.keys(link).sort()).toEqual([...p.limits].sort());
    }
    const owned = ['inproc', 'udp', 'tcp'].flatMap((t) => providerFor(t).limits);
    expect(new Set(owned).size).toBe(owned.length);
  });

  it('refuses an unknown limit and a value that is not a positive integer', () => {
    expect(code(() => splitLimits({ maxBogus: 1 }, providerFor('udp')))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => splitLimits({ maxContexts: 0 }, providerFor('udp')))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => splitLimits({ maxIrd: 1.5 }, providerFor('tcp')))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => splitLimits(7 as unknown as object, providerFor('udp')))).toBe(ErrorCode.InvalidArgument);
  });

  it('each transport checks the integrity modes its wire carries, host and port', () => {
    expect(code(() => providerFor('tcp').checkOptions({ transport: 'tcp', integrity: 'xxh3' }))).toBe(ErrorCode.InvalidArgument);
    expect(code(() => providerFor('udp').checkOptions({ transport: 'udp', integrity: 'xxh3' }))).toBeUndefined();
    expect(code(() => providerFor('udp').checkOptions({ transport: 'udp', integrity: 'md5' as 'none' }))).toBe(ErrorCode.InvalidArgument);
    // inproc has no wire: the option is ignored.
    expect(code(() => providerFor('inproc').checkOptions({ transport: 'inproc', integrity: 'md5' as 'none' }))).toBeUndefined();
    for (const t of ['udp', 'tcp']) {
      expect(code(() => providerFor(t).checkOptions({ transport: t, host: '' }))).toBe(ErrorCode.InvalidArgument);
      expect(code(() => providerFor(t).checkOptions({ transport: t, port: 70000 }))).toBe(ErrorCode.InvalidArgument);
    }
  });
});
