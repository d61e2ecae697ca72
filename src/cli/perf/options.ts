// `sabre perf` flags, with perftest's names and defaults where perftest has them.
import { parseArgs } from 'node:util';
import { choice, intOption, numOption, UsageError } from '../usage.js';

export const PERF_TESTS = ['write_bw', 'write_lat', 'read_bw', 'read_lat', 'send_bw', 'send_lat', 'atomic_lat'] as const;
export type PerfTest = (typeof PERF_TESTS)[number];
export type TransportName = 'udp' | 'tcp' | 'inproc';

export interface PerfOptions {
  test: PerfTest;
  sizes: number[];
  iters: number;
  durationS: number | undefined;
  conn: 'rc' | 'srd';
  qps: number;
  txDepth: number;
  inline: number;
  transport: TransportName;
  server: boolean;
  host: string | undefined;
  port: number;
  json: boolean;
  baseline: boolean;
  plot: string | undefined;
  mtu: number | undefined;
  workers: number;
}

export const PERF_HELP = `usage: sabre perf <test> [options] [HOST]

tests: ${PERF_TESTS.join(', ')}

Run with --server on one side and with the server's HOST on the other; with neither, both
sides run on loopback (two processes for udp/tcp, two devices in one process for inproc).

  -s, --size N         message size in bytes (default 65536 for *_bw, 2 for *_lat; atomics: 8)
  -a, --all            all sizes 2 … 2^23 (powers of two)
  -n, --iters N        iterations per size (default 5000 for *_bw, 1000 for *_lat)
  -D, --duration S     run each size for S seconds instead of a count
  -c, --connection T   rc | srd (default rc)
  -q, --qps N          number of QPs (default 1)
  -t, --tx-depth N     outstanding work requests (default 128; 1 for *_lat)
  -I, --inline N       max inline data in bytes (default 0)
      --transport T    udp | tcp | inproc (default udp)
      --server         be the server side
  -p, --port N         control port (default 18515)
      --mtu N          path MTU for udp (bytes)
      --workers N      udp: data-plane worker threads per device for the CRC32C (default 0)
      --json           one JSON object on stdout instead of tables
      --baseline       also run the same pattern over raw node:dgram / node:net (inproc: Uint8Array.set)
                       in the same run and print the ratio
      --plot FILE.svg  with -a: draw bandwidth or latency against size
  -h, --help           this help`;

export function parsePerf(argv: string[]): PerfOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      size: { type: 'string', short: 's' },
      all: { type: 'boolean', short: 'a' },
      iters: { type: 'string', short: 'n' },
      duration: { type: 'string', short: 'D' },
      connection: { type: 'string', short: 'c' },
      qps: { type: 'string', short: 'q' },
      'tx-depth': { type: 'string', short: 't' },
      inline: { type: 'string', short: 'I' },
      transport: { type: 'string' },
      server: { type: 'boolean' },
      port: { type: 'string', short: 'p' },
      mtu: { type: 'string' },
      workers: { type: 'string' },
      json: { type: 'boolean' },
      baseline: { type: 'boolean' },
      plot: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [testName, host, ...extra] = positionals;
  if (testName === undefined) throw new UsageError(`perf needs a test: ${PERF_TESTS.join(', ')}`);
  const test = choice('test', testName, PERF_TESTS)!;
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  if (values.server && host !== undefined) throw new UsageError('--server takes no HOST');
  const lat = test.endsWith('_lat');
  const atomic = test === 'atomic_lat';
  const size = intOption('--size', values.size, 1, 1 << 23);
  if (atomic && size !== undefined && size !== 8) throw new UsageError('atomic_lat works on 8-byte words: --size must be 8');
  if (values.all && size !== undefined) throw new UsageError('--all and --size exclude each other');
  const sizes = atomic ? [8] : values.all ? Array.from({ length: 23 }, (_, i) => 2 << i) : [size ?? (lat ? 2 : 65536)];
  if (values.plot !== undefined && !values.all) throw new UsageError('--plot needs --all');
  return {
    test,
    sizes,
    iters: intOption('--iters', values.iters, 1, 100_000_000) ?? (lat ? 1000 : 5000),
    durationS: numOption('--duration', values.duration, 0.01, 3600),
    conn: choice('--connection', values.connection, ['rc', 'srd'] as const) ?? 'rc',
    qps: intOption('--qps', values.qps, 1, 64) ?? 1,
    txDepth: intOption('--tx-depth', values['tx-depth'], 1, 4096) ?? (lat ? 1 : 128),
    inline: intOption('--inline', values.inline, 0, 1024) ?? 0,
    transport: choice('--transport', values.transport, ['udp', 'tcp', 'inproc'] as const) ?? 'udp',
    server: values.server ?? false,
    host,
    port: intOption('--port', values.port, 0, 65535) ?? 18515,
    json: values.json ?? false,
    baseline: values.baseline ?? false,
    plot: values.plot,
    mtu: intOption('--mtu', values.mtu, 576, 65507),
    workers: intOption('--workers', values.workers, 0, 16) ?? 0,
  };
}
