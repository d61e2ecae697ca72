// The perf tests, one row each: perftest's test names (ib_ prefix optional), what verb each
// drives, whether it is a bandwidth or a latency test, and perftest's defaults for it.

export type Verb = 'write' | 'read' | 'send' | 'atomic';
export type Kind = 'bw' | 'lat';

export interface PerfTestSpec {
  readonly verb: Verb;
  readonly kind: Kind;
  /** perftest's -n default: 5000 for write_bw (DEF_ITERS_WB), 1000 for the rest (DEF_ITERS). */
  readonly iters: number;
}

export const PERF_TEST_TABLE = {
  write_bw: { verb: 'write', kind: 'bw', iters: 5000 },
  write_lat: { verb: 'write', kind: 'lat', iters: 1000 },
  read_bw: { verb: 'read', kind: 'bw', iters: 1000 },
  read_lat: { verb: 'read', kind: 'lat', iters: 1000 },
  send_bw: { verb: 'send', kind: 'bw', iters: 1000 },
  send_lat: { verb: 'send', kind: 'lat', iters: 1000 },
  atomic_bw: { verb: 'atomic', kind: 'bw', iters: 1000 },
  atomic_lat: { verb: 'atomic', kind: 'lat', iters: 1000 },
} as const satisfies Record<string, PerfTestSpec>;

export type PerfTest = keyof typeof PERF_TEST_TABLE;
export const PERF_TESTS = Object.keys(PERF_TEST_TABLE) as PerfTest[];

export const ATOMIC_TYPES = ['FETCH_AND_ADD', 'CMP_AND_SWAP'] as const;
export type AtomicType = (typeof ATOMIC_TYPES)[number];

/** perftest's testsStr[] words for the title line ("RDMA_Write BW Test", "Send_imm Latency Test"). */
export function testTitle(t: { test: PerfTest; imm: boolean; atomicType: AtomicType; bidirectional: boolean }): string {
  const spec = PERF_TEST_TABLE[t.test];
  const verb = { write: 'RDMA_Write', read: 'RDMA_Read', send: 'Send', atomic: 'Atomic' }[spec.verb];
  const words = [t.imm ? `${verb}_imm` : verb];
  if (spec.verb === 'atomic') words.push(t.atomicType);
  if (spec.kind === 'bw' && t.bidirectional) words.push('Bidirectional');
  words.push(spec.kind === 'bw' ? 'BW' : 'Latency', 'Test');
  return words.join(' ');
}
