// `npm start`: what a newcomer should see first — two RDMA devices on loopback moving data
// with one-sided writes (perftest's table), then a short worker-pool stress run that checks
// every byte. Under a minute on two cores.
import type { Command } from './command.js';
import { parsePerf } from './perf/options.js';
import { runPerf } from './perf/index.js';
import { parseStress } from './stress/options.js';
import { printStress, runStress } from './stress/index.js';
import { UsageError } from './usage.js';

export const START_TRANSPORT = 'udp';

export const startCommand: Command = {
  name: 'start',
  summary: 'the default job (npm start): a loopback write_bw and a short stress run',
  help: () => 'usage: sabre start\n\nA loopback `sabre perf write_bw` and a short `sabre stress` run, under a minute.',
  async run(argv, io) {
    if (argv.length > 0) throw new UsageError(`start takes no arguments, got '${argv[0]}'`);
    return runStart(io.out, io.tty);
  },
};

export async function runStart(out: (l: string) => void, tty = false): Promise<number> {
  out(`sabre: software RDMA for Node.js — loopback demo (transport: ${START_TRANSPORT})`);
  out('');
  out(`1. sabre perf write_bw --transport ${START_TRANSPORT} -s 65536 -n 2000 --baseline`);
  out('   Two processes, one device each, over UDP on 127.0.0.1: the client keeps 128 RDMA WRITEs');
  out('   in flight into the server\'s registered memory; raw node:dgram (ack-clocked, so the');
  out('   receiver is never overrun) then moves the same bytes. CPU[s/GB]: both processes\' CPU per GB.');
  out('');
  await runPerf(parsePerf(['write_bw', '--transport', START_TRANSPORT, '-s', '65536', '-n', '2000', '--baseline']), out, tty);
  out('');
  out(`2. sabre stress --workers 2 --qps 4 --duration 5 --transport ${START_TRANSPORT}`);
  out('   Two worker threads, each with two devices and four QP pairs, run a random mix of writes,');
  out('   reads, vectored reads, sends and atomics and check every byte against a model.');
  out('');
  const s = await runStress(parseStress(['--workers', '2', '--qps', '4', '--duration', '5', '--transport', START_TRANSPORT]), out, tty);
  printStress(s, out);
  out('');
  out('More: sabre perf --help, sabre stress --help, npm run bench, docs/benchmarks.md');
  return s.errors > 0 || s.integrityFailures > 0 ? 1 : 0;
}
