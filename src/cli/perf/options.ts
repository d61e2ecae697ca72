// `sabre perf` flags: perftest's names, short letters and defaults wherever perftest has the
// flag (linux-rdma/perftest src/perftest_parameters.c), sabre's own long names kept as aliases.
import { choice, type Flag, flagHelp, intOption, numOption, parseFlags, str, UsageError } from '../usage.js';
import { ATOMIC_TYPES, type AtomicType, type Kind, PERF_TEST_TABLE, PERF_TESTS, type PerfTest, type Verb } from './tests.js';

export type { PerfTest } from './tests.js';
export { PERF_TESTS } from './tests.js';
export type TransportName = 'udp' | 'tcp' | 'inproc';
export const TRANSPORTS = ['udp', 'tcp', 'inproc'] as const;
export const OUTPUTS = ['bandwidth', 'message_rate', 'latency'] as const;

/** perftest MAX_SIZE: -a runs 2 … 2^23. */
export const MAX_SIZE = 1 << 23;
/** perftest MIN_ITER. */
export const MIN_ITERS = 5;

export interface PerfOptions {
  test: PerfTest;
  verb: Verb;
  kind: Kind;
  sizes: number[];
  iters: number;
  durationS: number | undefined;
  marginS: number;
  conn: 'rc' | 'srd';
  qps: number;
  txDepth: number;
  rxDepth: number;
  cqMod: number;
  /** Outstanding RDMA reads / atomics per QP (the QP's maxRdAtomic); undefined: the device's default. */
  outs: number | undefined;
  inline: number;
  transport: TransportName;
  server: boolean;
  host: string | undefined;
  port: number;
  bindHost: string | undefined;
  mtu: number | undefined;
  /** NIC threads per device; undefined: openDevice's default. */
  workers: number | undefined;
  /** What this side's device asks for (docs/integrity.md); undefined: the transport's default. */
  integrity: 'crc32c' | 'xxh3' | 'none' | undefined;
  bidirectional: boolean;
  noPeak: boolean;
  reportGbits: boolean;
  histogram: boolean;
  unsorted: boolean;
  warmUp: boolean;
  /** --write_with_imm / --send_with_imm. */
  imm: boolean;
  atomicType: AtomicType;
  cpuUtil: boolean;
  output: (typeof OUTPUTS)[number] | undefined;
  latencyGapUs: number;
  json: boolean;
  outJsonFile: string | undefined;
  baseline: boolean;
  report: string | undefined;
  metricsPort: number | undefined;
}

const FLAGS: readonly Flag[] = [
  { name: 'all', short: 'a', help: 'run sizes from 2 till 2^23 (not for atomics)' },
  { name: 'atomic_type', short: 'A', arg: '<FETCH_AND_ADD|CMP_AND_SWAP>', help: 'atomic tests: the operation (default FETCH_AND_ADD)' },
  { name: 'bidirectional', short: 'b', help: 'bandwidth tests: both sides send at once; the table sums both directions' },
  { name: 'connection', short: 'c', arg: '<RC|SRD>', help: 'QP type (default RC); SRD needs a datagram transport (udp, inproc)' },
  { name: 'ib-dev', short: 'd', arg: '<dev>', help: 'device: sabre_udp | sabre_tcp | sabre_inproc (same as --transport)' },
  { name: 'duration', short: 'D', arg: '<sec>', help: 'run each size for <sec> seconds instead of -n iterations (every test)' },
  { name: 'margin', short: 'f', arg: '<sec>', help: 'with -D: leave <sec> out of the measurement at both ends (default 0; perftest: 2)' },
  { name: 'CPU-freq', short: 'F', help: 'accepted; no effect (sabre times with performance.now(), not CPU cycles)' },
  { name: 'report-histogram', short: 'H', help: 'latency tests: print every sample, sorted ("#, usec" then "i, value")' },
  { name: 'report-unsorted', short: 'U', help: 'latency tests: print every sample in the order measured (implies -H)' },
  { name: 'inline_size', short: 'I', aliases: ['inline'], arg: '<size>', help: 'max inline data in bytes (default 0)' },
  { name: 'mtu', short: 'm', arg: '<mtu>', help: 'udp: path MTU, the largest datagram (default: the device\'s)' },
  { name: 'iters', short: 'n', arg: '<iters>', help: `iterations per size (at least ${MIN_ITERS}; default 5000 for write_bw, 1000 for the rest)` },
  { name: 'noPeak', short: 'N', help: 'bandwidth tests: do not compute the peak (BW peak prints 0.00)' },
  { name: 'outs', short: 'o', arg: '<num>', help: 'read/atomic tests: outstanding reads/atomics per QP (default: the device\'s, 16)' },
  { name: 'port', short: 'p', arg: '<port>', help: 'control port to listen on / connect to (default 18515)' },
  { name: 'qp', short: 'q', aliases: ['qps'], arg: '<num>', help: 'number of QPs (default 1)' },
  { name: 'cq-mod', short: 'Q', arg: '<n>', help: 'bandwidth tests, rc: signal one work request in <n> (default 1; perftest: 100)' },
  { name: 'rx-depth', short: 'r', arg: '<dep>', help: 'receives kept posted per QP for send tests and write-with-imm (default 512)' },
  { name: 'size', short: 's', arg: '<size>', help: 'message size in bytes (default 65536 for *_bw, 2 for *_lat, 8 for atomics)' },
  { name: 'tx-depth', short: 't', arg: '<dep>', help: 'work requests in flight per run (default 128 for *_bw; latency tests: 1)' },
  { name: 'version', short: 'V', help: 'print the version' },
  { name: 'report_gbits', help: 'bandwidth in Gb/sec (10^9 bits) instead of MiB/sec (2^20 bytes)' },
  { name: 'perform_warm_up', help: 'untimed warm-up first: tx-depth operations per QP (bw), 5000 iterations or 3 s (lat; the baseline 5000)' },
  { name: 'write_with_imm', help: 'write tests: RDMA Write with immediate (the target consumes a receive per write)' },
  { name: 'send_with_imm', help: 'send tests: Send with immediate' },
  { name: 'cpu_util', help: 'add a CPU_Util[%] column: this process\'s CPU time over the run\'s wall time' },
  { name: 'output', arg: '<bandwidth|message_rate|latency>', help: 'print only that number per size' },
  { name: 'out_json', help: 'also write the JSON report to perftest_out.json' },
  { name: 'out_json_file', arg: '<file>', help: 'also write the JSON report to <file>' },
  { name: 'latency_gap', arg: '<usec>', help: 'latency tests: idle <usec> between iterations (not timed)' },
  { name: 'bind_source_ip', arg: '<ip>', help: 'bind the device and control socket to <ip> (default: the address the control connection uses)' },
  { name: 'transport', arg: '<udp|tcp|inproc>', help: 'sabre transport (default udp)' },
  { name: 'server', help: 'be the server side (perftest: run without HOST); serves one client, then exits' },
  { name: 'workers', arg: '<n>', help: 'udp/tcp: NIC threads per device (default 1: the data path on a thread of its own; 0: inline on the main thread)' },
  { name: 'integrity', arg: '<crc32c|xxh3|none>', help: 'what this side asks for; the stronger wish of the two sides wins (udp: default xxh3; tcp: crc32c | none, MPA CRC on when either side asks; docs/integrity.md)' },
  { name: 'baseline', help: 'also run the same pattern without sabre in the same run (raw node:dgram ack-clocked, node:net, or Uint8Array.set) and print sabre÷baseline speed and CPU per GB' },
  { name: 'json', help: 'one JSON object on stdout instead of tables (rows are flat objects)' },
  { name: 'report', arg: '<file.html>', help: 'write a self-contained HTML report: header, tables, charts (log size axis)' },
  { name: 'metrics-port', arg: '<port>', help: 'serve Prometheus metrics of this side\'s device at http://127.0.0.1:<port>/metrics during the run' },
  { name: 'help', short: 'h', help: 'this help' },
];

const NOT_SUPPORTED = `perftest flags sabre does not take (no meaning for a software device, or not built):
  -R/--rdma_cm, -z/--comm_rdma_cm (QP info always travels over the control TCP socket),
  -e/--events (sabre always sleeps on CQ events), -l/--post_list, --recv_post_list, -O/--dualport,
  -g/--mcg, -M/--MGID (no multicast), -x/--gid-index, -i/--ib-port, -S/--sl, -T/--tos, -L, -u,
  --tclass, --flow_label, --pkey_index (InfiniBand addressing), --use-srq (no SRQ), -C/--report-cycles,
  --run_infinitely, --reversed, --report-both, --report-per-port, -w/--limit_bw, -y/--limit_msgrate,
  -W/--report-counters (use --metrics-port), --odp, --mmap, --use_hugepages, --use_cuda and the other
  accelerator memories, the rate limiter, --payload_file_path, --data_validation.
Differences: bandwidth is MiB/sec (2^20 B) as in perftest 6.x; latency statistics keep every
sample (perftest drops the two largest); write_lat detects arrival by polling the last byte as
perftest does (on udp a message of several datagrams may land out of order: --write_with_imm
completes on the whole message); --baseline does not combine with -b.`;

export const PERF_HELP = `usage: sabre perf <test> [options] [HOST]

tests: ${PERF_TESTS.join(', ')}  (ib_write_bw etc. accepted)

As perftest: run with --server on one side and with the server's HOST on the other (the server
takes its sizes and depths from the client); both sides print the table:

  sabre perf write_bw --server          # terminal (or host) 1: waits for a client
  sabre perf write_bw HOST              # terminal (or host) 2: HOST is 127.0.0.1 on one machine

Unlike ib_write_bw, with neither --server nor HOST sabre does not wait for a client: it runs
both sides on loopback (two processes for udp/tcp, two devices in one process for inproc) and
says so on its first line. With -D on a terminal, a status line on stderr shows the time run
and the current rate (nothing when stderr is piped or with --json).

${flagHelp(FLAGS)}

${NOT_SUPPORTED}`;

const DEVICES: Record<string, TransportName> = { sabre_udp: 'udp', sabre_tcp: 'tcp', sabre_inproc: 'inproc', udp: 'udp', tcp: 'tcp', inproc: 'inproc' };

export function parsePerf(argv: string[]): PerfOptions {
  const { values: v, positionals } = parseFlags('perf', argv, FLAGS);
  const [testName, host, ...extra] = positionals;
  if (testName === undefined) throw new UsageError(`perf needs a test: ${PERF_TESTS.join(', ')}`);
  const test = choice('test', testName.replace(/^ib_/, ''), PERF_TESTS)!;
  const spec = PERF_TEST_TABLE[test];
  const bw = spec.kind === 'bw';
  const only = (flag: string, ok: boolean, what: string) => {
    if (v[flag] !== undefined && !ok) throw new UsageError(`--${flag} is for ${what}`);
  };
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);

  const devT = v['ib-dev'] !== undefined ? DEVICES[String(v['ib-dev'])] : undefined;
  if (v['ib-dev'] !== undefined && devT === undefined) throw new UsageError(`-d must name a sabre device: sabre_udp, sabre_tcp or sabre_inproc, got '${String(v['ib-dev'])}'`);
  const tOpt = choice('--transport', v.transport, TRANSPORTS);
  if (devT && tOpt && devT !== tOpt) throw new UsageError(`-d ${String(v['ib-dev'])} and --transport ${tOpt} disagree`);
  const transport = devT ?? tOpt ?? 'udp';
  const conn = choice('--connection', typeof v.connection === 'string' ? v.connection.toLowerCase() : v.connection, ['rc', 'srd'] as const) ?? 'rc';
  if (conn === 'srd' && transport === 'tcp') throw new UsageError('srd QPs need a datagram transport: use --transport udp or inproc (iWARP over TCP is connection-oriented)');

  const server = v.server === true;
  if (server && host !== undefined) throw new UsageError('--server takes no HOST');
  if (transport === 'inproc' && (server || host !== undefined)) throw new UsageError('inproc devices live in one process: run without --server and HOST');

  only('atomic_type', spec.verb === 'atomic', 'atomic_bw and atomic_lat');
  only('bidirectional', bw, 'bandwidth tests');
  only('noPeak', bw, 'bandwidth tests');
  only('report_gbits', bw, 'bandwidth tests');
  only('cq-mod', bw, 'bandwidth tests');
  only('report-histogram', !bw, 'latency tests');
  only('report-unsorted', !bw, 'latency tests');
  only('latency_gap', !bw, 'latency tests');
  only('write_with_imm', spec.verb === 'write', 'write_bw and write_lat');
  only('send_with_imm', spec.verb === 'send', 'send_bw and send_lat');
  only('outs', spec.verb === 'read' || spec.verb === 'atomic', 'read and atomic tests');
  only('margin', v.duration !== undefined, '-D runs');

  const atomic = spec.verb === 'atomic';
  const size = intOption('--size', v.size, 1, MAX_SIZE);
  if (atomic && size !== undefined && size !== 8) throw new UsageError('atomic tests work on 8-byte words: --size must be 8');
  if (atomic && v.all) throw new UsageError('--all is not for atomic tests (8-byte words)');
  if (v.all && size !== undefined) throw new UsageError('--all and --size exclude each other');
  const sizes = atomic ? [8] : v.all ? Array.from({ length: 23 }, (_, i) => 2 << i) : [size ?? (bw ? 65536 : 2)];

  const iters = intOption('--iters', v.iters, MIN_ITERS, 100_000_000);
  const durationS = numOption('--duration', v.duration, 0.01, 3600);
  if (iters !== undefined && durationS !== undefined) throw new UsageError('-n and -D exclude each other');
  const marginS = numOption('--margin', v.margin, 0, 3600) ?? 0;
  if (durationS !== undefined && 2 * marginS >= durationS) throw new UsageError('-D must be more than twice --margin');

  const cqMod = intOption('--cq-mod', v['cq-mod'], 1, 4096) ?? 1;
  if (cqMod > 1 && conn === 'srd') throw new UsageError('--cq-mod needs rc: srd completions come in no promised order');
  const baseline = v.baseline === true;
  if (baseline && v.bidirectional) throw new UsageError('--baseline measures one direction: drop -b for a baseline');
  const output = choice('--output', v.output, OUTPUTS);
  if (output === 'latency' && bw) throw new UsageError('--output=latency is for latency tests');
  if ((output === 'bandwidth' || output === 'message_rate') && !bw) throw new UsageError(`--output=${output} is for bandwidth tests`);

  return {
    test,
    verb: spec.verb,
    kind: spec.kind,
    sizes,
    iters: iters ?? spec.iters,
    durationS,
    marginS,
    conn,
    qps: intOption('--qp', v.qp, 1, 64) ?? 1,
    txDepth: bw ? (intOption('--tx-depth', v['tx-depth'], 1, 4096) ?? 128) : 1,
    rxDepth: intOption('--rx-depth', v['rx-depth'], 1, 16384) ?? 512,
    cqMod,
    outs: intOption('--outs', v.outs, 1, 1024),
    inline: intOption('--inline_size', v.inline_size, 0, 1024) ?? 0,
    transport,
    server,
    host,
    port: intOption('--port', v.port, 0, 65535) ?? 18515,
    bindHost: str(v.bind_source_ip),
    mtu: intOption('--mtu', v.mtu, 576, 65507),
    workers: intOption('--workers', v.workers, 0, 16),
    integrity: integrityOption(v.integrity, transport),
    bidirectional: v.bidirectional === true,
    noPeak: v.noPeak === true,
    reportGbits: v.report_gbits === true,
    histogram: v['report-histogram'] === true || v['report-unsorted'] === true,
    unsorted: v['report-unsorted'] === true,
    warmUp: v.perform_warm_up === true,
    imm: v.write_with_imm === true || v.send_with_imm === true,
    atomicType: (choice('--atomic_type', v.atomic_type, ATOMIC_TYPES) ?? 'FETCH_AND_ADD') as AtomicType,
    cpuUtil: v.cpu_util === true,
    output,
    latencyGapUs: intOption('--latency_gap', v.latency_gap, 0, 10_000_000) ?? 0,
    json: v.json === true,
    outJsonFile: str(v.out_json_file) ?? (v.out_json === true ? 'perftest_out.json' : undefined),
    baseline,
    report: str(v.report),
    metricsPort: intOption('--metrics-port', v['metrics-port'], 0, 65535),
  };
}

function integrityOption(v: string | boolean | undefined, transport: string): PerfOptions['integrity'] {
  const m = choice('--integrity', v, ['crc32c', 'xxh3', 'none'] as const);
  if (m === 'xxh3' && transport === 'tcp') throw new UsageError('--integrity xxh3 is udp only: MPA on tcp has only its CRC (crc32c | none)');
  return m;
}

/** What the client tells the server in `hello`: everything that shapes the server's buffers and duties. */
export type PeerParams = Pick<
  PerfOptions,
  'test' | 'verb' | 'kind' | 'sizes' | 'iters' | 'durationS' | 'conn' | 'qps' | 'txDepth' | 'rxDepth' | 'cqMod' | 'outs' | 'inline' | 'transport' | 'bidirectional' | 'imm' | 'atomicType' | 'noPeak' | 'reportGbits' | 'warmUp' | 'marginS' | 'histogram' | 'unsorted' | 'cpuUtil'
>;

export function peerParams(o: PerfOptions): PeerParams {
  const { test, verb, kind, sizes, iters, durationS, conn, qps, txDepth, rxDepth, cqMod, outs, inline, transport, bidirectional, imm, atomicType, noPeak, reportGbits, warmUp, marginS, histogram, unsorted, cpuUtil } = o;
  return { test, verb, kind, sizes, iters, durationS, conn, qps, txDepth, rxDepth, cqMod, outs, inline, transport, bidirectional, imm, atomicType, noPeak, reportGbits, warmUp, marginS, histogram, unsorted, cpuUtil };
}

/**
 * The server's check of a client's hello: every field within the bounds the command line has,
 * before any of it sizes a buffer or a QP count (a peer is not trusted with our memory).
 */
export function checkPeerParams(x: unknown): PeerParams {
  const p = x as Record<string, unknown>;
  const bad = (what: string): never => {
    throw new Error(`bad hello from the client: ${what}`);
  };
  if (!p || typeof p !== 'object') bad('not an object');
  const int = (k: string, min: number, max: number) => {
    const v = p[k];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) bad(`${k} must be an integer in ${min}..${max}`);
  };
  const one = <T>(k: string, allowed: readonly T[]) => {
    if (!allowed.includes(p[k] as T)) bad(`${k} must be one of ${allowed.join('|')}`);
  };
  const bool = (k: string) => {
    if (typeof p[k] !== 'boolean') bad(`${k} must be true or false`);
  };
  one('test', PERF_TESTS);
  one('transport', TRANSPORTS);
  one('conn', ['rc', 'srd'] as const);
  one('atomicType', ATOMIC_TYPES);
  const spec = PERF_TEST_TABLE[p.test as PerfTest];
  if (p.verb !== spec.verb || p.kind !== spec.kind) bad('verb/kind do not match the test');
  if (!Array.isArray(p.sizes) || p.sizes.length < 1 || p.sizes.length > 23) bad('sizes must list 1 to 23 sizes');
  for (const z of p.sizes as unknown[]) if (typeof z !== 'number' || !Number.isInteger(z) || z < 1 || z > MAX_SIZE) bad(`sizes must be integers in 1..${MAX_SIZE}`);
  int('iters', MIN_ITERS, 100_000_000);
  int('qps', 1, 64);
  int('txDepth', 1, 4096);
  int('rxDepth', 1, 16384);
  int('cqMod', 1, 4096);
  int('inline', 0, 1024);
  if (p.outs !== undefined && p.outs !== null) int('outs', 1, 1024);
  for (const k of ['durationS', 'marginS']) {
    const v = p[k];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 3600)) bad(`${k} must be a number of seconds up to 3600`);
  }
  for (const k of ['bidirectional', 'imm', 'noPeak', 'reportGbits', 'warmUp', 'histogram', 'unsorted', 'cpuUtil']) bool(k);
  return {
    ...(p as unknown as PeerParams),
    // JSON has no undefined: absent optional numbers arrive as null or not at all.
    outs: (p.outs ?? undefined) as number | undefined,
    durationS: (p.durationS ?? undefined) as number | undefined,
  };
}
