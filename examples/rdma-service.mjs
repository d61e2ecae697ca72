// A two-process RDMA service with rdma_cm-style setup: the server listens, hands each client
// the address and rkey of a region it may write and read (in the connection's private data),
// and waits for the client's "done" Send; the client writes a greeting, reads it back, and
// sends "done". Run: node examples/rdma-service.mjs [udp|tcp]   (spawns the server itself)
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Access, connect, connectionInfo, listen, openDevice } from 'sabre';

const transport = process.argv[2] === 'udp' ? 'udp' : 'tcp';
const te = new TextEncoder();
const td = new TextDecoder();

if (process.argv[3] === 'server') {
  const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const pd = dev.allocPd();
  const region = pd.regMr(4096, Access.LocalWrite | Access.RemoteWrite | Access.RemoteRead);
  const inbox = pd.regMr(64, Access.LocalWrite);
  const listener = listen(dev, {
    pd, service: 7,
    privateData: te.encode(JSON.stringify({ addr: region.addr, rkey: region.rkey })),
  });
  console.log(JSON.stringify(dev.address)); // the parent reads where to connect
  const qp = await listener.accept();
  const done = await qp.recv({ sgList: [{ addr: inbox.addr, length: 64, lkey: inbox.lkey }] });
  console.log(`server: ${td.decode(inbox.buffer.subarray(0, done.byteLen))}; region holds "${td.decode(region.buffer.subarray(0, 13))}"`);
  // Close only once the client's last Send has completed there (its stdin pipe then ends):
  // a device closed at once could take the acknowledgement of that Send with it.
  process.stdin.resume();
  await new Promise((r) => process.stdin.once('end', r));
  listener.close();
  await dev.close();
} else {
  const server = spawn(process.execPath, [fileURLToPath(import.meta.url), transport, 'server'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: server.stdout })[Symbol.asyncIterator]();
  const address = JSON.parse((await lines.next()).value);

  const dev = await openDevice({ transport, host: '127.0.0.1', port: 0 });
  const qp = await connect(dev, address, { service: 7 });
  const { addr, rkey } = JSON.parse(td.decode(connectionInfo(qp).privateData));
  const mr = qp.pd.regMr(4096, Access.LocalWrite);
  mr.buffer.set(te.encode('hello, server'));
  await qp.write({ sgList: [{ addr: mr.addr, length: 13, lkey: mr.lkey }], remoteAddr: addr, rkey });
  await qp.read({ sgList: [{ addr: mr.addr + 1024, length: 13, lkey: mr.lkey }], remoteAddr: addr, rkey });
  console.log(`client: read back "${td.decode(mr.buffer.subarray(1024, 1024 + 13))}"`);
  mr.buffer.set(te.encode('done'), 2048);
  await qp.send({ sgList: [{ addr: mr.addr + 2048, length: 4, lkey: mr.lkey }] });
  server.stdin.end();
  console.log((await lines.next()).value);
  await new Promise((r) => server.once('exit', r));
  await dev.close();
}
