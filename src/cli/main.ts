#!/usr/bin/env node
// The `sabre` command. Each subcommand parses its own flags; a usage error is one line on
// stderr and exit status 2; a run that saw errors exits 1.
import { PERF_HELP, parsePerf } from './perf/options.js';
import { runPerf, runServer } from './perf/index.js';
import { STRESS_HELP, parseStress } from './stress/options.js';
import { printStress, runStress } from './stress/index.js';
import { runStart } from './start.js';
import { kernelReport } from './kernels.js';
import { UsageError } from './usage.js';
import { runFilesCommand } from './files/index.js';

const HELP = `usage: sabre <command> [options]

commands:
  perf <test>   perftest-style microbenchmarks: write_bw, write_lat, read_bw, read_lat,
                send_bw, send_lat, atomic_lat (sabre perf --help)
  stress        a worker-pool stress test that checks every byte (sabre stress --help)
  start         the default job (npm start): a loopback write_bw and a short stress run
  kernels       data-plane kernel self-check and throughput (CRC32C, XXH3-128)
  serve DIR     serve a directory over the file service (M6); get, put, ls are its clients
  get / put     download / upload a file: sabre get HOST:PORT/PATH LOCAL, sabre put LOCAL HOST:PORT/PATH
  ls            list a served directory: sabre ls HOST:PORT[/DIR]

Run 'sabre <command> --help' for the options of a command.`;

const out = (l: string) => process.stdout.write(l + '\n');

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  const wantsHelp = rest.includes('--help') || rest.includes('-h');
  switch (cmd) {
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(HELP);
      return cmd === undefined ? 2 : 0;
    case 'perf': {
      if (wantsHelp) return out(PERF_HELP), 0;
      const o = parsePerf(rest);
      if (o.server) {
        await runServer(o, out, (port) => process.send?.({ port }));
        return 0;
      }
      const report = await runPerf(o, o.json ? () => {} : out);
      if (o.json) out(JSON.stringify(report));
      return 0;
    }
    case 'stress': {
      if (wantsHelp) return out(STRESS_HELP), 0;
      const o = parseStress(rest);
      const s = await runStress(o, out, !o.json && process.stderr.isTTY === true);
      if (o.json) out(JSON.stringify(s));
      else printStress(s, out);
      return s.errors > 0 || s.integrityFailures > 0 ? 1 : 0;
    }
    case 'start':
      if (wantsHelp) return out('usage: sabre start\n\nA loopback `sabre perf write_bw` and a short `sabre stress` run, under a minute.'), 0;
      if (rest.length > 0) throw new UsageError(`start takes no arguments, got '${rest[0]}'`);
      return runStart(out);
    case 'kernels':
      if (wantsHelp) return out('usage: sabre kernels\n\nSelf-check the data-plane kernels against known vectors and print their throughput.'), 0;
      if (rest.length > 0) throw new UsageError(`kernels takes no arguments, got '${rest[0]}'`);
      return kernelReport(out);
    case 'serve': case 'get': case 'put': case 'ls':
      return runFilesCommand(cmd, rest, out);
    default:
      throw new UsageError(`unknown command '${cmd}' (try 'sabre --help')`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof UsageError || (e as { code?: string })?.code?.startsWith?.('ERR_PARSE_ARGS')) {
      process.stderr.write(`sabre: ${(e as Error).message}\n`);
      process.exitCode = 2;
    } else {
      // Operational failures (peer unreachable, a completion error) are one line; the stack is
      // for us, behind SABRE_DEBUG=1.
      const err = e as Error;
      process.stderr.write(`sabre: ${process.env.SABRE_DEBUG ? (err?.stack ?? err) : (err?.message ?? err)}\n`);
      process.exitCode = 1;
    }
  },
);
