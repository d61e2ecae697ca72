// The `sabre` command: a table of subcommands. A new command is one row here and one module
// exporting a Command (src/cli/command.ts). Exit status: 0 clean, 1 when a run saw errors, 2 on
// a usage error (one line on stderr). The bin, ./main.ts, loads this module, or the one-file
// bundle linked from it (./linked.ts).
import { diagnosticsFromEnv } from '../metrics/diagnostics.js';
import type { Command, Io } from './command.js';
import { filesCommands } from './files/index.js';
import { kernelsCommand } from './kernels.js';
import { perfCommand } from './perf/command.js';
import { startCommand } from './start.js';
import { stressCommand } from './stress/command.js';
import { UsageError } from './usage.js';
import { versionLine } from './version.js';

export const COMMANDS: readonly Command[] = [
  perfCommand,
  stressCommand,
  startCommand,
  kernelsCommand,
  ...filesCommands,
];

function help(): string {
  const w = Math.max(...COMMANDS.map((c) => c.name.length)) + 4;
  return [
    'usage: sabre <command> [options]',
    '',
    'commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(w)}${c.summary.replace(/\n/g, `\n  ${' '.repeat(w)}`)}`),
    '',
    "Run 'sabre <command> --help' for the options of a command; 'sabre --version' for the version.",
  ].join('\n');
}

const isVersion = (a: string) => a === '--version' || a === '-V';
const isHelp = (a: string) => a === '--help' || a === '-h';

async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) return io.out(help()), 2;
  if (isHelp(name) || name === 'help') return io.out(help()), 0;
  if (isVersion(name)) return io.out(versionLine()), 0;
  const cmd = COMMANDS.find((c) => c.name === name);
  if (!cmd) throw new UsageError(`unknown command '${name}' (try 'sabre --help')`);
  // Before the command parses anything: `sabre perf -V` and `sabre perf write_bw --help` must
  // work whatever else is on the line. (Everything after a bare '--' is an argument.)
  const flags = rest.indexOf('--') >= 0 ? rest.slice(0, rest.indexOf('--')) : rest;
  if (flags.some(isHelp)) return io.out(cmd.help()), 0;
  if (flags.some(isVersion)) return io.out(versionLine()), 0;
  return cmd.run(rest, io);
}

const io: Io = { out: (l) => process.stdout.write(l + '\n'), tty: process.stderr.isTTY === true };
// `sabre … | head -1`: the reader went away. The work is done or no longer wanted; leave quietly
// instead of dying on an unhandled EPIPE with a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});
// SABRE_DIAG=1 (or a list of channel names): structured diagnostics as JSON lines on stderr.
diagnosticsFromEnv();

main(process.argv.slice(2), io).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    const err = e as Error;
    if (e instanceof UsageError) {
      process.stderr.write(`sabre: ${err.message}\n`);
      process.exit(2);
    }
    // Operational failures (peer unreachable, a completion error, a port in use) are one line;
    // the stack is for us, behind SABRE_DEBUG=1. Exit at once: whatever the failed run left
    // open (a socket, a child) must not keep the command alive.
    process.stderr.write(`sabre: ${process.env.SABRE_DEBUG ? (err?.stack ?? err) : (err?.message ?? err)}\n`);
    process.exit(1);
  },
);
