// `npm start`: what a newcomer should see first — two RDMA devices on loopback moving data
// with one-sided writes (perftest's table), then a short worker-pool stress run that checks
// every byte. Under a minute on two cores.
import { parsePerf } from './perf/options.js';
import { runPerf } from './perf/index.js';
import { parseStress } from './stress/options.js';
import { printStress, runStress } from './stress/index.js';

export const START_TRANSPORT = 'udp';

export async function runStart(out: (l: string) => void): Promise<number> {
  out(`sabre: software RDMA for Node.js — loopback demo (transport: ${START_TRANSPORT})`);
  out('');
  out(`1. sabre perf write_bw --transport ${START_TRANSPORT} -s 65536 -n 2000 --baseline`);
  out('   Two processes, one device each, over UDP on 127.0.0.1: the client keeps 128 RDMA WRITEs');
  out('   in flight into the server\'s registered memory; raw node:dgram then moves the same bytes.');
  out('');
  await runPerf(parsePerf(['write_bw', '--transport', START_TRANSPORT, '-s', '65536', '-n', '2000', '--baseline']), out);
  out('');
  out(`2. sabre stress --workers 2 --qps 4 --duration 5 --transport ${START_TRANSPORT}`);
  out('   Two worker threads, each with two devices and four QP pairs, run a random mix of writes,');
  out('   reads, vectored reads, sends and atomics and check every byte against a model.');
  out('');
  const s = await runStress(parseStress(['--workers', '2', '--qps', '4', '--duration', '5', '--transport', START_TRANSPORT]), out, process.stderr.isTTY === true);
  printStress(s, out);
  out('');
  out('More: sabre perf --help, sabre stress --help, npm run bench, docs/benchmarks.md');
  return s.errors > 0 || s.integrityFailures > 0 ? 1 : 0;
}
