import { choice, type Flag, flagHelp, intOption, numOption, parseFlags, UsageError } from '../usage.js';

export interface StressOptions {
  workers: number;
  qps: number;
  durationS: number;
  ops: number;
  maxSize: number;
  transport: 'udp' | 'tcp' | 'inproc';
  seed: number;
  json: boolean;
  /** Testing aid: corrupt one byte of the model so the checker must report an integrity failure. */
  injectFault: boolean;
}

const FLAGS: readonly Flag[] = [
  { name: 'workers', arg: 'N', help: 'worker threads (default 2)' },
  { name: 'qps', arg: 'N', help: 'QP pairs per worker (default 4)' },
  { name: 'duration', arg: 'S', help: 'seconds, at most (default 10)' },
  { name: 'ops', arg: 'N', help: 'operations in total, at most (default 1000000)' },
  { name: 'max-size', arg: 'N', help: 'largest message in bytes (default 65536)' },
  { name: 'transport', arg: 'T', help: 'udp | tcp | inproc (default udp, as sabre perf)' },
  { name: 'seed', arg: 'N', help: 'PRNG seed (default 1); worker i uses seed + i' },
  { name: 'json', help: 'one JSON object on stdout at the end' },
  { name: 'inject-fault', help: 'corrupt the model once (checks the checker; the run must fail)' },
  { name: 'help', short: 'h', help: 'this help' },
];

export const STRESS_HELP = `usage: sabre stress [options]

A piscina worker pool; each worker opens two devices and --qps connected QP pairs and drives a
seeded random mix of RDMA write, read, vectored read, send and atomics, checking every byte it
reads back or receives against a model. Bounded by --duration and --ops, whichever ends first.
On a terminal a status line shows progress (stderr; nothing when piped).
Exit status: 0 clean, 1 on any error or integrity failure, 2 on a usage error.

${flagHelp(FLAGS)}`;

export function parseStress(argv: string[]): StressOptions {
  const { values, positionals } = parseFlags('stress', argv, FLAGS);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  return {
    workers: intOption('--workers', values.workers, 1, 64) ?? 2,
    qps: intOption('--qps', values.qps, 1, 256) ?? 4,
    durationS: numOption('--duration', values.duration, 0.1, 86_400) ?? 10,
    ops: intOption('--ops', values.ops, 1, 1e12) ?? 1_000_000,
    maxSize: intOption('--max-size', values['max-size'], 8, 1 << 24) ?? 65536,
    transport: choice('--transport', values.transport, ['udp', 'tcp', 'inproc'] as const) ?? 'udp',
    seed: intOption('--seed', values.seed, 0, 2 ** 32 - 1) ?? 1,
    json: values.json === true,
    injectFault: values['inject-fault'] === true,
  };
}
