// A channel peer for test/channel/peer-lost.test.ts: opens a device (argv[2]: udp | tcp; argv[3]:
// workers, or 'default'), listens for channels on service 9, prints { address }, accepts one
// channel, sends it one message, prints "ready" and waits to be killed (SIGKILL: no channel
// CLOSE, no QP close notice, nothing on the wire). Bounded: it exits by itself after 60 s.
import { listenChannels, openDevice } from '../../dist/index.js';

setTimeout(() => process.exit(3), 60_000).unref();
const workers = process.argv[3] === 'default' ? {} : { workers: Number(process.argv[3]) };
const dev = await openDevice({ transport: process.argv[2], host: '127.0.0.1', port: 0, ...workers });
const l = listenChannels(dev, { service: 9 });
console.log(JSON.stringify({ address: dev.address }));
const ch = await l.accept(20_000);
await ch.send('hello');
console.log('ready');
setInterval(() => undefined, 1000);
