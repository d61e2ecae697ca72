// The provider registry: transport name → provider. openDevice looks the transport up here and
// checks openDevice's limits against the one table of who enforces each.
import { ErrorCode, SabreError } from '../core/errors.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import { inprocProvider } from './inproc.js';
import type { TransportProvider } from './provider.js';
import { tcpProvider } from './tcp.js';
import { udpProvider } from './udp.js';

/** The openDevice limits the engine enforces, on every transport. */
const ENGINE_LIMITS: readonly string[] = [
  'maxOooEntries', 'maxOooBytes', 'maxSrdFlows', 'maxSrdFlowsPerPeer', 'maxIrd', 'maxAnswerBytes', 'maxQpAnswerBytes',
] satisfies (keyof EngineBounds)[];

const PROVIDERS = new Map<string, TransportProvider>();

/** Make `p` openable as openDevice({ transport: p.name }); a name is registered once. */
export function registerProvider(p: TransportProvider): void {
  if (PROVIDERS.has(p.name)) throw new SabreError(ErrorCode.InvalidArgument, `transport '${p.name}' is already registered`);
  PROVIDERS.set(p.name, p);
}

for (const p of [inprocProvider, udpProvider, tcpProvider]) registerProvider(p);

export function providerFor(transport: unknown): TransportProvider {
  const p = typeof transport === 'string' ? PROVIDERS.get(transport) : undefined;
  if (p === undefined) throw new SabreError(ErrorCode.InvalidArgument, `unknown transport ${String(transport)}`);
  return p;
}

/**
 * Check openDevice's limits before anything is bound, and keep those of the engine and of
 * `provider`: a limit another transport enforces is accepted and has nothing to bound here.
 */
export function splitLimits(limits: object | undefined, provider: TransportProvider): { engine: Record<string, number>; link: Record<string, number> } {
  const out = { engine: {} as Record<string, number>, link: {} as Record<string, number> };
  if (limits === undefined) return out;
  if (typeof limits !== 'object' || limits === null) throw new SabreError(ErrorCode.InvalidArgument, 'limits must be an object');
  for (const [k, v] of Object.entries(limits)) {
    if (v === undefined) continue;
    const known = ENGINE_LIMITS.includes(k) || [...PROVIDERS.values()].some((p) => p.limits.includes(k));
    if (!known) throw new SabreError(ErrorCode.InvalidArgument, `unknown limit '${k}' (have: ${allLimits().join(', ')})`);
    if (!Number.isSafeInteger(v) || (v as number) < 1) throw new SabreError(ErrorCode.InvalidArgument, `limits.${k} must be a positive integer, got ${String(v)}`);
    if (ENGINE_LIMITS.includes(k)) out.engine[k] = v as number;
    else if (provider.limits.includes(k)) out.link[k] = v as number;
  }
  return out;
}

function allLimits(): string[] {
  return [...ENGINE_LIMITS, ...[...PROVIDERS.values()].flatMap((p) => p.limits)];
}
