// Child of exit.test.ts: builds a listener with waits pending and a connection never accepted,
// closes it (or only its device) and returns; the parent checks that nothing left behind — a
// timer, a socket, a registration — keeps this process alive. Prints "closed" when done.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, connectChannel, listen, listenChannels, openDevice, serveFiles } from '../../dist/index.js';

const [what, transport, how] = process.argv.slice(2);
const open = () => openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });

if (what === 'files') {
  const server = await serveFiles(mkdtempSync(join(tmpdir(), 'sabre-exit-')), { transports: [transport] });
  await server.close();
  await server.close();
} else {
  const [a, b] = [await open(), await open()];
  const listenOn = (service) => (what === 'cm' ? listen(b, { service }) : listenChannels(b, { service }));
  // One listener holds a connection the application never takes; another has a wait with a
  // long timeout and an iteration pending.
  const held = listenOn(3);
  const l = listenOn(4);
  const pending = l.accept(600_000).catch((e) => e.code);
  const loop = (async () => {
    for await (const x of l) void x;
  })();
  const peer = what === 'cm' ? await connect(a, b.address, { service: 3 }) : await connectChannel(a, b.address, { service: 3 });
  await new Promise((r) => setTimeout(r, 20));
  if (how === 'listener') {
    for (const x of [held, l, held, l]) x.close();
  }
  await b.close();
  if (what === 'cm') peer.destroy();
  else await peer.close().catch(() => undefined);
  await a.close();
  const code = await pending;
  await loop;
  if (code !== 'ERR_CLOSED') throw new Error(`accept settled with ${code}`);
}
process.stdout.write('closed\n');
