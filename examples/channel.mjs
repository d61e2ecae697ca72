// Message channels: ordered, exactly-once messages whose receive memory grows only when a
// message needs it. An echo server and a client, one process. Run: node examples/channel.mjs [udp|tcp|inproc]
import { channelStats, connectChannel, listenChannels, openDevice } from 'sabre';

const transport = process.argv[2] ?? 'udp';
const open = () => openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
const server = await open();
const listener = listenChannels(server, { service: 9 });
const served = (async () => {
  for await (const ch of listener) {
    for await (const msg of ch) await ch.send({ echo: msg });
  }
})();

const client = await open();
const ch = await connectChannel(client, server.address, { service: 9 });
const replies = ch[Symbol.asyncIterator]();
await ch.send({ hello: 'world' });
console.log('reply:', JSON.stringify((await replies.next()).value));
await ch.send(new Uint8Array(200_000).fill(7)); // enlarges the receive buffers, then rendezvous
const big = (await replies.next()).value;
console.log(`big reply: ${big.echo.length} bytes, phase ${ch.stats().phase}`);
console.log('client channels:', JSON.stringify({ channels: channelStats(client).channels }));
await ch.close();
listener.close();
await client.close();
await server.close();
await served.catch(() => {});
