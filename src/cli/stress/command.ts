// `sabre stress`: the command row (see ./index.ts for the run and ./options.ts for the flags).
import type { Command } from '../command.js';
import { printStress, runStress } from './index.js';
import { parseStress, STRESS_HELP } from './options.js';

export const stressCommand: Command = {
  name: 'stress',
  summary: 'a worker-pool stress test that checks every byte (sabre stress --help)',
  help: () => STRESS_HELP,
  async run(argv, io) {
    const o = parseStress(argv);
    const s = await runStress(o, io.out, !o.json && io.tty);
    if (o.json) io.out(JSON.stringify(s));
    else printStress(s, io.out);
    return s.errors > 0 || s.integrityFailures > 0 ? 1 : 0;
  },
};
