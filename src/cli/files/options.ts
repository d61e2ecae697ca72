// Flags of `sabre serve / get / put / ls` (the syntax of DESIGN §4 and issue 14 is contract).
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { TOP as SERVE_RANGES } from '../../files/serve-checks.js';
import { choice, intOption, negativeValuesJoined, UsageError, usageFromParseArgs } from '../usage.js';

export type FilesTransport = 'udp' | 'tcp';
const TRANSPORTS = ['udp', 'tcp'] as const;
export type FilesIntegrity = 'xxh3' | 'crc32c' | 'none';
const INTEGRITY = ['xxh3', 'crc32c', 'none'] as const;
const INTEGRITY_HELP = `  --integrity I       the devices' integrity check: udp xxh3 (default) | crc32c | none;
                      tcp crc32c (default) | none (MPA's CRC off; xxh3 leaves tcp at crc32c)`;

export const FILES_HELP: Record<'serve' | 'get' | 'put' | 'ls', string> = {
  serve: `usage: sabre serve DIR [--host H] [--port P] [--transport udp|tcp] [--token T] [--read-only] [--fsync] [--integrity I] [--metrics-port M]
                  [--max-connections-per-host N] [--part-sweep-age-ms MS]

Serve DIR to file clients (the file service, M6). The control pipe listens on TCP port P; the
udp device binds UDP port P and the tcp device TCP port P+1 (all ephemeral with -p 0).

  --host H            interface to listen on (default 127.0.0.1)
  -p, --port P        control port (default 7070; 0: ephemeral, printed)
  --transport T       serve only udp or only tcp (default: both)
  --token T           the shared secret (default: $SABRE_TOKEN, else a random one, printed)
  --read-only         refuse every write
  --fsync             fsync each put before renaming it into place
${INTEGRITY_HELP}
  --metrics-port M    serve Prometheus metrics (devices, QPs, links, the file service's
                      counters) at http://127.0.0.1:M/metrics (0: any free port, printed)
  --max-connections-per-host N  RDMA connections one client host may hold (default 16, 1..1024);
                      past it, with all of the host's authenticated, a new one is refused:
                      "the server refused: too many connections from your host"
  --part-sweep-age-ms MS  at start, remove put temporaries (.sabre-<hex>.part) under DIR at
                      least MS ms old, left by a killed server (default 3600000; 0: all —
                      only where no other server serves DIR)
  -h, --help          this help`,
  get: `usage: sabre get HOST:PORT/REMOTE/PATH LOCALFILE [--token T] [--transport udp|tcp] [--json] [--dedup] [--integrity I] [--request-timeout MS]

Download REMOTE/PATH (relative to the served directory) into LOCALFILE (written to
LOCALFILE.sabre-part and renamed when complete).

  --token T           the server's token (default: $SABRE_TOKEN)
  --transport T       udp | tcp (default: udp if the server has it, else tcp)
  --json              print one JSON object: bytes, seconds, transport, …
  --dedup             rsync over RDMA: LOCALFILE as it is now is the basis, only the chunks of
                      the server's version it lacks cross the wire (files up to 256 MiB)
  --request-timeout MS  give up on a request the server has not answered within MS ms
                      (default 60000; 0: never): the command fails with one line
${INTEGRITY_HELP}
  -h, --help          this help`,
  put: `usage: sabre put LOCALFILE HOST:PORT/REMOTE/PATH [--token T] [--transport udp|tcp] [--json] [--fsync] [--dedup] [--integrity I] [--request-timeout MS]

Upload LOCALFILE to REMOTE/PATH. The server writes a temporary file and renames it over the
name only when every byte is in it: an interrupted put never leaves a truncated file there.

  --token T           the server's token (default: $SABRE_TOKEN)
  --transport T       udp | tcp (default: udp if the server has it, else tcp)
  --fsync             ask the server to fsync the file before the rename
  --json              print one JSON object: bytes, seconds, transport, …
  --dedup             rsync over RDMA: the server's current version of the file is the basis,
                      only the chunks of LOCALFILE it lacks cross the wire (files up to 256 MiB)
  --request-timeout MS  give up on a request the server has not answered within MS ms
                      (default 60000; 0: never): the command fails with one line
${INTEGRITY_HELP}
  -h, --help          this help`,
  ls: `usage: sabre ls HOST:PORT[/REMOTE/DIR] [--token T] [--transport udp|tcp] [--json] [--integrity I] [--request-timeout MS]

List a directory of the served tree (default: its top).

  --token T           the server's token (default: $SABRE_TOKEN)
  --transport T       udp | tcp (default: udp if the server has it, else tcp)
  --json              print one JSON object { path, entries: [...] }
  --request-timeout MS  give up on a request the server has not answered within MS ms
                      (default 60000; 0: never): the command fails with one line
${INTEGRITY_HELP}
  -h, --help          this help`,
};

export interface ServeCli {
  dir: string;
  host: string;
  port: number;
  transports: FilesTransport[];
  token: string | undefined;
  readOnly: boolean;
  fsync: boolean;
  /** --integrity, or undefined for each transport's default. */
  integrity: FilesIntegrity | undefined;
  /** --metrics-port: where /metrics is served (127.0.0.1), or undefined for none. */
  metricsPort: number | undefined;
  /** --max-connections-per-host (ServeOptions.maxConnectionsPerHost), or undefined for its default. */
  maxConnectionsPerHost: number | undefined;
  /** --part-sweep-age-ms (ServeOptions.partSweepAgeMs), or undefined for its default. */
  partSweepAgeMs: number | undefined;
}

export interface RemoteSpec {
  host: string;
  port: number;
  path: string;
}

export interface ClientCli {
  token: string;
  /** Providers to offer, preferred first: the one given, or udp then tcp. */
  transport: FilesTransport[];
  json: boolean;
  fsync: boolean;
  dedup: boolean;
  integrity: FilesIntegrity | undefined;
  /** --request-timeout (ConnectOptions.requestTimeoutMs), or undefined for its default. */
  requestTimeoutMs: number | undefined;
}

/** HOST:PORT[/PATH] — the path is relative to the served directory (its leading "/" dropped). */
export function parseRemote(s: string, needPath: boolean): RemoteSpec {
  const m = /^(\[[^\]]+\]|[^/:]+):(\d+)(\/.*)?$/.exec(s);
  if (!m) throw new UsageError(`expected HOST:PORT${needPath ? '/PATH' : '[/DIR]'}, got '${s}'`);
  const port = intOption('port', m[2], 1, 65535)!;
  const path = (m[3] ?? '').replace(/^\/+/, '');
  if (needPath && path === '') throw new UsageError(`'${s}' names no remote file (HOST:PORT/PATH)`);
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port, path };
}

function tokenOf(v: string | undefined): string | undefined {
  // An empty --token is a mistake (an unset shell variable), never "pick one for me".
  if (v === '') throw new UsageError('--token is empty: give the secret, or leave --token out');
  const t = v ?? process.env.SABRE_TOKEN;
  return t === undefined || t === '' ? undefined : t;
}

/** parseArgs, its errors turned into one-line usage errors as every sabre command words them. */
function parse<T extends ParseArgsConfig>(cmd: string, config: T): ReturnType<typeof parseArgs<T>> {
  try {
    const args = negativeValuesJoined([...(config.args ?? [])], (config.options ?? {}) as Record<string, { type: 'string' | 'boolean'; short?: string }>);
    return parseArgs({ ...config, args }) as ReturnType<typeof parseArgs<T>>;
  } catch (e) {
    throw usageFromParseArgs(cmd, e);
  }
}

export function parseServe(argv: string[]): ServeCli {
  const { values, positionals } = parse('serve', {
    args: argv, allowPositionals: true, strict: true,
    options: {
      host: { type: 'string' }, port: { type: 'string', short: 'p' }, transport: { type: 'string' }, token: { type: 'string' },
      'read-only': { type: 'boolean' }, fsync: { type: 'boolean' }, 'metrics-port': { type: 'string' }, integrity: { type: 'string' },
      'max-connections-per-host': { type: 'string' }, 'part-sweep-age-ms': { type: 'string' },
    },
  });
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'serve needs a directory (sabre serve DIR)' : `serve takes one directory, got ${positionals.length} arguments`);
  const t = choice('--transport', values.transport, TRANSPORTS);
  return {
    dir: positionals[0]!, host: values.host ?? '127.0.0.1', port: intOption('--port', values.port, 0, 65534) ?? 7070,
    transports: t ? [t] : ['udp', 'tcp'], token: tokenOf(values.token), readOnly: values['read-only'] ?? false, fsync: values.fsync ?? false,
    integrity: choice('--integrity', values.integrity, INTEGRITY),
    metricsPort: intOption('--metrics-port', values['metrics-port'], 0, 65535),
    // The ranges serveFiles checks (./serve-checks.ts), so a bad value is a usage error here.
    maxConnectionsPerHost: intOption('--max-connections-per-host', values['max-connections-per-host'], ...SERVE_RANGES['maxConnectionsPerHost']!),
    partSweepAgeMs: intOption('--part-sweep-age-ms', values['part-sweep-age-ms'], ...SERVE_RANGES['partSweepAgeMs']!),
  };
}

export function parseClient(argv: string[], cmd: 'get' | 'put' | 'ls'): { o: ClientCli; positionals: string[] } {
  const { values, positionals } = parse(cmd, {
    args: argv, allowPositionals: true, strict: true,
    options: {
      token: { type: 'string' }, transport: { type: 'string' }, json: { type: 'boolean' }, integrity: { type: 'string' }, 'request-timeout': { type: 'string' }, ...(cmd === 'put' ? { fsync: { type: 'boolean' } } : {}),
      ...(cmd !== 'ls' ? { dedup: { type: 'boolean' } } : {}),
    },
  });
  const want = cmd === 'ls' ? 1 : 2;
  if (positionals.length !== want) throw new UsageError(`${cmd} takes ${want === 1 ? 'HOST:PORT[/DIR]' : cmd === 'get' ? 'HOST:PORT/PATH LOCALFILE' : 'LOCALFILE HOST:PORT/PATH'}, got ${positionals.length} argument${positionals.length === 1 ? '' : 's'}`);
  const token = tokenOf(values.token as string | undefined);
  if (!token) throw new UsageError(`${cmd} needs the server's token: --token T or SABRE_TOKEN`);
  return {
    o: { token, transport: ((t) => (t ? [t] : ['udp', 'tcp']))(choice('--transport', values.transport as string | undefined, TRANSPORTS)) as FilesTransport[], json: (values.json as boolean | undefined) ?? false, fsync: (values.fsync as boolean | undefined) ?? false, dedup: (values.dedup as boolean | undefined) ?? false,
      integrity: choice('--integrity', values.integrity as string | undefined, INTEGRITY),
      requestTimeoutMs: intOption('--request-timeout', values['request-timeout'] as string | undefined, 0, 0x7fff_ffff),
    },
    positionals,
  };
}
