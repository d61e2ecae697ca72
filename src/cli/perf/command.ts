// `sabre perf`: the command row.
import type { Command } from '../command.js';
import { runPerf, runServer } from './index.js';
import { parsePerf, PERF_HELP } from './options.js';

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
    const report = await runPerf(o, io.out, io.tty);
    if (o.json) io.out(JSON.stringify(report));
    return 0;
  },
};
