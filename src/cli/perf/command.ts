// `sabre perf`: the command row.
import type { Command } from '../command.js';
import { runPerf, runServer } from './index.js';
import { parsePerf, PERF_HELP } from './options.js';

/** The first line of a loopback run (no HOST, no --server). */
export function loopbackNote(test: string): string {
  return `no host given: running both sides on loopback; for two terminals: sabre perf ${test} --server / sabre perf ${test} HOST`;
}

export const perfCommand: Command = {
  name: 'perf',
  summary: 'perftest-style microbenchmarks: write_bw, write_lat, read_bw, read_lat, send_bw,\nsend_lat, atomic_bw, atomic_lat (sabre perf --help)',
  help: () => PERF_HELP,
  async run(argv, io) {
    const o = parsePerf(argv);
    if (o.server) {
      // Forked as the loopback server: report the port to the parent and never outlive it; once
      // done, let go of the IPC channel, which would otherwise keep this process alive.
      const orphaned = () => process.exit(1);
      if (process.send) process.once('disconnect', orphaned);
      try {
        return await runServer(o, io.out, (port) => process.send?.({ port }));
      } finally {
        process.off('disconnect', orphaned);
        process.channel?.unref();
      }
    }
    // ib_write_bw with no host waits for a client; here both sides run on loopback, which a
    // perftest user would not expect: the first line says so and how to get the two-sided form.
    if (o.host === undefined && o.transport !== 'inproc' && !o.json && o.output === undefined) io.out(loopbackNote(o.test));
    const report = await runPerf(o, io.out, io.tty && !o.json);
    if (o.json) io.out(JSON.stringify(report));
    return 0;
  },
};
