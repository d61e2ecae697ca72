// Structured diagnostics on node:diagnostics_channel: off by default and free when off — a
// publisher pays one `hasSubscribers` check and builds no message unless someone subscribed
// (a logger such as pino would format or at least call into a level check on every event).
// Subscribe in-process with diagnostics_channel.subscribe(name, fn), or set SABRE_DIAG=1 (all)
// or SABRE_DIAG=sabre:perf:run,sabre:perf:result to print them to stderr as JSON lines.
import diagnostics_channel from 'node:diagnostics_channel';

/** Every channel sabre publishes on, and what a message holds. One table: docs/observability.md lists it. */
export const DIAGNOSTIC_CHANNELS = {
  'sabre:perf:run': '{ phase: "start" | "end", role: "client" | "server", test, transport, connection, sizes } — a perf run begins or ends',
  'sabre:perf:result': '{ role, test, transport, …row } — one result row as printed (sabre or baseline), flat as in --json',
  'sabre:perf:wc-error': '{ qpn, wrId, status, opcode } — a completion with an error status, which ends the run',
  'sabre:perf:baseline': '{ transport, mode, size, sent, received, lost, window, ackEvery } — a raw baseline run finished',
  'sabre:perf:control': '{ role, method, ms } — one control-channel call (client) or request served (server)',
  'sabre:perf:refused': '{ what, reason, count } — the perf server turned something away (a connection, a line, a row, a baseline datagram)',
  'sabre:metrics:scrape': '{ url, status, ms, bytes } — one request to the metrics endpoint',
} as const;

export type DiagnosticChannel = keyof typeof DIAGNOSTIC_CHANNELS;

const channels = Object.fromEntries(
  Object.keys(DIAGNOSTIC_CHANNELS).map((n) => [n, diagnostics_channel.channel(n)]),
) as Record<DiagnosticChannel, diagnostics_channel.Channel>;

/** Publish `make()` on `name` if anyone listens; `make` is not called otherwise. */
export function publish(name: DiagnosticChannel, make: () => object): void {
  const ch = channels[name];
  if (ch.hasSubscribers) ch.publish({ channel: name, time: new Date().toISOString(), ...make() });
}

/** SABRE_DIAG=1|all|name,name…: print those channels to `write` (stderr) as JSON lines. Returns an unsubscribe. */
export function diagnosticsFromEnv(spec = process.env.SABRE_DIAG, write: (s: string) => void = (s) => process.stderr.write(s)): () => void {
  if (!spec || spec === '0') return () => {};
  const names = spec === '1' || spec === 'all' ? (Object.keys(DIAGNOSTIC_CHANNELS) as DiagnosticChannel[]) : (spec.split(',').map((s) => s.trim()) as DiagnosticChannel[]);
  const fn = (msg: unknown) => write(JSON.stringify(msg, (_k, v) => (typeof v === 'bigint' ? String(v) : v)) + '\n');
  const subscribed = names.filter((n) => n in DIAGNOSTIC_CHANNELS);
  for (const n of subscribed) diagnostics_channel.subscribe(n, fn);
  return () => {
    for (const n of subscribed) diagnostics_channel.unsubscribe(n, fn);
  };
}
