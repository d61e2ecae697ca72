// Opening a device's NIC: the device memory, the provider's link, and the port the verbs
// layer talks to — inline on the calling thread (`workers: 0`, and inproc), or a NIC thread.
import { ErrorCode, SabreError } from '../core/errors.js';
import { DeviceMemory } from '../dataplane/device-memory.js';
import type { EngineBounds } from '../rdmap/bounds.js';
import { InlinePort } from './inline-port.js';
import { MultiPort } from './multi-port.js';
import { ThreadPort } from './thread-port.js';
import type { NicPort } from './port.js';
import type { ProviderOptions, TransportProvider } from './provider.js';

/** openDevice's options, checked, as the NIC reads them. */
export interface PortOptions extends ProviderOptions {
  memoryBytes?: number;
  maximumMemoryBytes?: number;
  maxMr?: number;
  /** How long a NIC thread polls its WQE ring after a turn that gave completions (µs, 0..1000; resolved by openDevice). */
  nicPollUs?: number;
  /** Poll by spinning instead of a futex wait. */
  nicPollSpin?: boolean;
}

/** The memory, link and engine of one device on this thread. */
export async function openInline(provider: TransportProvider, opts: PortOptions, limits: { engine: Partial<EngineBounds>; link: Record<string, number> }, shared?: DeviceMemory): Promise<InlinePort> {
  // `shared`: another NIC thread's device memory, attached (./thread-arena.ts).
  const mem = shared ?? await DeviceMemory.create({
    ...(opts.memoryBytes !== undefined ? { initialBytes: opts.memoryBytes } : {}),
    ...(opts.maxMr !== undefined ? { regionEntries: opts.maxMr + 1 } : {}),
    maximumBytes: opts.maximumMemoryBytes ?? 1024 * 1024 * 1024,
    // openDevice starts no data-plane workers (`workers` counts NIC threads, ./multi-port.ts):
    // the memory map keeps no slots for them.
    workerSlots: 0,
  });
  const { link, mss } = await provider.open(mem, opts, limits.link, limits.engine);
  const segment = mss ?? opts.mss;
  return new InlinePort(mem, link, { ...(segment !== undefined ? { mss: segment } : {}), bounds: limits.engine });
}

/** openDevice's `workers` when the caller names none: SABRE_WORKERS (0..16) if set, else DEFAULT_WORKERS. */
export function defaultWorkers(): number {
  const env = process.env['SABRE_WORKERS'];
  if (env !== undefined && env !== '') {
    const n = Number(env);
    if (Number.isInteger(n) && n >= 0 && n <= 16) return n;
    throw new SabreError(ErrorCode.InvalidArgument, `SABRE_WORKERS must be an integer in 0..16, not '${env}'`);
  }
  return DEFAULT_WORKERS;
}

/** The largest nicPollUs: a poll holds the NIC thread's sockets back for as long. */
export const MAX_NIC_POLL_US = 1000;

/**
 * openDevice's `nicPollUs`, checked; when the caller names none, SABRE_NIC_POLL_US if set, else
 * 0: no polling (on a machine with few cores a polling NIC thread takes the core the
 * application needs to answer it; docs/nic.md).
 */
export function nicPollUs(given: number | undefined): number {
  const env = process.env['SABRE_NIC_POLL_US'];
  const v = given ?? (env !== undefined && env !== '' ? Number(env) : 0);
  if (!Number.isInteger(v) || v < 0 || v > MAX_NIC_POLL_US) {
    throw new SabreError(ErrorCode.InvalidArgument, `nicPollUs${given === undefined ? ' (SABRE_NIC_POLL_US)' : ''} must be an integer in 0..${MAX_NIC_POLL_US}, not '${given ?? env}'`);
  }
  return v;
}

/** openDevice's `nicPollSpin`, checked (default false: a poll is a futex wait, which leaves the core to others). */
export function nicPollSpin(given: boolean | undefined): boolean {
  if (given !== undefined && typeof given !== 'boolean') throw new SabreError(ErrorCode.InvalidArgument, 'nicPollSpin must be a boolean');
  return given === true;
}

/** A NIC thread per udp / tcp device unless asked otherwise. */
export const DEFAULT_WORKERS = 1;

/**
 * `workers` ≥ 1: the NIC runs on that many threads of its own (where the provider has a wire;
 * inproc devices hand frames by reference and stay on the calling thread), each with its own
 * socket and its share of the QPs (./multi-port.ts). `workers: 0`: inline.
 */
export async function openPort(provider: TransportProvider, opts: PortOptions, limits: { engine: Partial<EngineBounds>; link: Record<string, number> }): Promise<NicPort> {
  const workers = opts.workers ?? 0;
  if (workers === 0 || !provider.threaded) return openInline(provider, opts, limits);
  const { workers: _, ...rest } = opts;
  const lim = limits as { engine: Record<string, number>; link: Record<string, number> };
  if (workers >= 2) return MultiPort.open(provider.name, rest as Record<string, unknown>, lim, workers);
  return ThreadPort.open(provider.name, rest as Record<string, unknown>, lim);
}
