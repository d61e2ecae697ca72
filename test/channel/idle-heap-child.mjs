// The child of test/channel/idle-heap.test.ts, in a process of its own (a small heap, so its
// snapshot is quick to read): opens N idle channels between two devices, lets them settle,
// takes a heap snapshot of this (the application's) thread and prints one JSON line — how many
// objects of each named class the channels' ends hold, and how many heap numbers (boxed doubles)
// the channel objects and their epoch records point at. argv: N, workers.
// Imports the built package (dist/), as a user's service would.
import v8 from 'node:v8';
import vm from 'node:vm';
import { connectChannel, listenChannels, openDevice } from '../../dist/index.js';

const [n, workers] = [Number(process.argv[2]), Number(process.argv[3])];
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const opts = { transport: 'udp', host: '127.0.0.1', port: 0, workers };
const [a, b] = [await openDevice(opts), await openDevice(opts)];
const listener = listenChannels(b, { service: 3, maxChannelsPerPeer: n });
const accepted = [];
const accepting = (async () => {
  for await (const c of listener) if (accepted.push(c) === n) return;
})();
const dialed = [];
for (let i = 0; i < n; i++) dialed.push(await connectChannel(a, b.address, { service: 3 }));
await accepting;
// Both ends idle: the HELLOs' completions are in, nothing else to do.
for (let i = 0; i < 4; i++) {
  await new Promise((r) => setTimeout(r, 50));
  gc();
}

let json = '';
for await (const chunk of v8.getHeapSnapshot()) json += chunk;
const snap = JSON.parse(json);
json = '';
const meta = snap.snapshot.meta;
const nf = meta.node_fields.length;
const ef = meta.edge_fields.length;
const [ti, ni, eci] = ['type', 'name', 'edge_count'].map((f) => meta.node_fields.indexOf(f));
const [eti, eni, eto] = ['type', 'name_or_index', 'to_node'].map((f) => meta.edge_fields.indexOf(f));
const types = meta.node_types[0];
const etypes = meta.edge_types[0];
const { nodes, edges, strings } = snap;
const count = {};
const channelObjects = new Set(['Channel', 'ChannelCore', 'Inbound', 'Outbound']);
let heapNumbers = 0;
const nameOf = (i) => strings[nodes[i * nf + ni]];
const isNumber = (i) => types[nodes[i * nf + ti]] === 'number';
// Edge walk: an object's edges follow the edges of the objects before it.
const firstEdge = new Int32Array(nodes.length / nf);
for (let i = 0, e = 0; i < nodes.length / nf; i++) {
  firstEdge[i] = e;
  e += nodes[i * nf + eci] * ef;
}
const numbersOf = (i) => {
  let k = 0;
  for (let j = 0, e = firstEdge[i]; j < nodes[i * nf + eci]; j++, e += ef) {
    if (etypes[edges[e + eti]] !== 'weak' && isNumber(edges[e + eto] / nf)) k++;
  }
  return k;
};
for (let i = 0; i < nodes.length / nf; i++) {
  if (types[nodes[i * nf + ti]] !== 'object') continue;
  const name = nameOf(i);
  count[name] = (count[name] ?? 0) + 1;
  if (!channelObjects.has(name)) continue;
  heapNumbers += numbersOf(i);
  // The epoch records: Inbound.cur, Outbound.tx.
  for (let j = 0, e = firstEdge[i]; j < nodes[i * nf + eci]; j++, e += ef) {
    const en = strings[edges[e + eni]];
    if (etypes[edges[e + eti]] === 'property' && (en === 'cur' || en === 'tx')) heapNumbers += numbersOf(edges[e + eto] / nf);
  }
}
const pick = ['Channel', 'ChannelCore', 'Inbound', 'Outbound', 'Lifecycle', 'Outbox'];
console.log(JSON.stringify({ counts: Object.fromEntries(pick.map((k) => [k, count[k] ?? 0])), heapNumbers }));
for (const c of [...dialed, ...accepted]) await c.close().catch(() => {});
listener.close();
await a.close();
await b.close();
process.exit(0);
