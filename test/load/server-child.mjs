// The far side of the load suite, in its own process (so that blocking one event loop never
// blocks the other): a file server over udp and tcp and a channel echo service on one device
// per transport. Prints one JSON line with where to reach them; then takes commands on stdin:
//   block MS   busy-wait the event loop for MS milliseconds (as a busy service does)
//   exit       close everything and exit
// Imports the built package (dist/), as a user's server would.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { listenChannels, openDevice, serveFiles } from '../../dist/index.js';

const dir = mkdtempSync(join(tmpdir(), 'sabre-load-srv-'));
const token = 'load-suite-token-0123456789';
const server = await serveFiles(dir, { host: '127.0.0.1', port: 0, token, transports: ['udp', 'tcp'] });
const echo = {};
const listeners = [];
for (const transport of ['udp', 'tcp']) {
  const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const l = listenChannels(dev, { service: 11 });
  listeners.push({ dev, l });
  echo[transport] = dev.address;
  void (async () => {
    for await (const ch of l) {
      void (async () => {
        try {
          for await (const m of ch) await ch.send(m);
        } catch (e) {
          if (e?.code !== 'ERR_CLOSED') console.error(`echo: ${e?.message ?? e}`);
        }
      })();
    }
  })();
}
console.log(JSON.stringify({ files: server.address, token, dir, echo }));

const busy = (ms) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};
for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, arg] = line.trim().split(/\s+/);
  if (cmd === 'block') {
    busy(Number(arg));
    console.log('blocked');
  } else if (cmd === 'seed') {
    // seed NAME BYTES SEED: a file the client will put a half-changed copy of (dedup basis)
    const [, name, bytes, seed] = line.trim().split(/\s+/);
    writeFileSync(join(dir, name), pattern(Number(bytes), Number(seed)));
    console.log('seeded');
  } else if (cmd === 'exit') break;
}
for (const { dev, l } of listeners) {
  l.close();
  await dev.close();
}
await server.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);

/** Deterministic bytes (xorshift32 per word): both processes make the same file from a seed. */
export function pattern(n, seed) {
  const out = new Uint8Array(n);
  const w = new Uint32Array(out.buffer, 0, n >>> 2);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < w.length; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    w[i] = x;
  }
  return out;
}
