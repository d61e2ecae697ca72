// The FastCDC kernel as the dedup data path meets it, for two builds alternated: a fresh process
// per run (so the first piece pays for the engine's first, unoptimised code, as a CLI transfer
// does), 48 MiB of random bytes in shared memory chunked in 2 MiB pieces (the sender's step) with
// the file service's average chunk (8 KiB). Prints per build the median over runs of: the median
// piece (steady state), the first piece, and the whole 48 MiB.
//   A=/path/to/base/worktree B=. N=6 node bench/cdc-pieces.bench.mjs      (each tree built)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

if (process.argv[2] === 'run') {
  const tree = process.argv[3];
  const { createSharedMemory, instantiateKernels } = await import(pathToFileURL(`${tree}/dist/dataplane/wasm.js`).href);
  const { cdcParams, gearTable, writeCdcState } = await import(pathToFileURL(`${tree}/dist/kernels/cdc.js`).href);
  const N = 48 << 20, PIECE = 2 << 20;
  const pages = Math.ceil((N + (1 << 20)) / 65536) + 2;
  const memory = createSharedMemory(pages, pages);
  const k = await instantiateKernels(memory);
  const u8 = new Uint8Array(memory.buffer), dv = new DataView(memory.buffer);
  const base = Math.ceil(Number(k.heapBase()) / 64) * 64;
  const TABLE = base, ST = base + 4096, OUT = base + 8192, DATA = base + (1 << 20);
  const key = new Uint8Array(randomBytes(32));
  u8.set(randomBytes(N), DATA);
  u8.set(gearTable(key), TABLE);
  k.cdcPrepareTable(TABLE);
  writeCdcState(dv, ST, cdcParams({ avg: 8192, key }), TABLE);
  const ts = [];
  for (let p = 0; p < N; p += PIECE) {
    const t = performance.now();
    for (let at = 0; at < PIECE; ) {
      k.cdcChunk(ST, DATA + p + at, PIECE - at, OUT, 16384);
      at += dv.getUint32(ST + 12, true);
    }
    ts.push(performance.now() - t);
  }
  const sorted = [...ts].sort((a, b) => a - b);
  console.log(JSON.stringify({ piece: sorted[sorted.length >> 1], first: ts[0], total: ts.reduce((a, b) => a + b, 0) }));
} else {
  const A = resolve(process.env.A ?? '.'), B = resolve(process.env.B ?? '.');
  const N = Number(process.env.N ?? 6);
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const runs = { A: [], B: [] };
  for (let i = 0; i < N; i++) {
    for (const s of i % 2 ? ['B', 'A'] : ['A', 'B']) {
      runs[s].push(JSON.parse(execFileSync(process.execPath, [new URL(import.meta.url).pathname, 'run', s === 'A' ? A : B], { encoding: 'utf8' })));
    }
  }
  console.log(`cdc kernel, 48 MiB in 2 MiB pieces, avg 8 KiB, fresh process, ${N} runs each alternated: medians (ms)`);
  for (const s of ['A', 'B']) {
    const r = runs[s];
    const range = (f) => `${med(r.map(f)).toFixed(2)} [${Math.min(...r.map(f)).toFixed(2)}-${Math.max(...r.map(f)).toFixed(2)}]`;
    console.log(`${s}: piece ${range((x) => x.piece)}  first ${range((x) => x.first)}  total ${range((x) => x.total)}`);
  }
}
