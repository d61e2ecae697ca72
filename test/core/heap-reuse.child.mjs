// Child of heap-reuse.test.ts: 12 000 datagrams of 65 000 B over loopback into node:dgram (which
// allocates, zero-fills and frees a buffer per datagram), windowed so none is lost to the socket
// buffer; prints the minor page faults per datagram received after the first 2000.
import dgram from 'node:dgram';
import { keepFreedHeapMapped, noteReceived } from '../../dist/core/heap-reuse.js';

// 'on': as the benches do; 'note': as a link does once 16 MiB came in (the same promise is then
// the one already started, awaited only so the count starts with the thresholds raised).
if (process.argv[2] === 'on') await keepFreedHeapMapped();
if (process.argv[2] === 'note') {
  noteReceived(16 << 20);
  await keepFreedHeapMapped();
}
const N = 12_000;
const r = dgram.createSocket('udp4');
await new Promise((res) => r.bind(0, '127.0.0.1', res));
r.setRecvBufferSize(8 << 20);
const s = dgram.createSocket('udp4');
await new Promise((res) => s.bind(0, '127.0.0.1', res));
const buf = Buffer.alloc(65_000, 1);
const port = r.address().port;
let got = 0;
let sent = 0;
// Counted after the first 2000 (the process's own start-up faults are not the point).
let f0 = 0;
await new Promise((done) => {
  const pump = () => {
    for (let i = 0; i < 32 && sent < N && sent - got < 48; i++, sent++) s.send(buf, port, '127.0.0.1');
  };
  const stop = setTimeout(done, 20_000);
  const iv = setInterval(pump, 1);
  r.on('message', () => {
    if (++got === 2000) f0 = process.resourceUsage().minorPageFault;
    if (got % 16 === 0) pump();
    if (got >= N - 100) {
      clearTimeout(stop);
      clearInterval(iv);
      done();
    }
  });
  pump();
});
console.log(JSON.stringify({ got, perDatagram: (process.resourceUsage().minorPageFault - f0) / Math.max(1, got - 2000) }));
process.exit(0);
