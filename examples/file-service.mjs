// The file service (M6) from the API: serve a directory, connect a client, write a file,
// read it back, list the directory. Run: node examples/file-service.mjs [udp|tcp]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileClient, serveFiles } from 'sabre';

const transport = process.argv[2] ?? 'udp';
const dir = mkdtempSync(join(tmpdir(), 'sabre-example-'));
const server = await serveFiles(dir, { host: '127.0.0.1', port: 0 });
try {
  const c = await FileClient.connect(server.address, { token: server.token, transport });
  const w = await c.open('notes.txt', { flags: 'w' });
  await c.write(w, 0, new TextEncoder().encode('written over RDMA')); // carried by Sends
  await c.close(w);
  const r = await c.open('notes.txt');
  const back = await c.read(r, 0, r.size); // answered by the server's RDMA Writes
  await c.close(r);
  console.log(`read back: "${new TextDecoder().decode(back)}"`);
  console.log('listing:', (await c.list('')).map((e) => e.name).join(', '));
  await c.end();
} finally {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
}
