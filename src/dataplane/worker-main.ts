// A data-plane worker: instantiates the module over the device memory (the Module and the
// Memory arrive in workerData) and serves its request ring until a Stop job. Requests are
// drained in batches: one look at the ring, every ready job run, completions published with
// one store, request slots released with one store.
import { parentPort, workerData } from 'node:worker_threads';
import { CPL_ID, CPL_OP, CPL_RESULT, CPL_STATUS, JobOp, REQ_ID, REQ_OP, runJob } from './jobs.js';
import { Ring } from './ring.js';
import { instantiateKernels } from './wasm.js';

export interface WorkerInit {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  reqRing: number;
  cplRing: number;
  scratchBase: number;
  scratchBytes: number;
  index: number;
}

const init = workerData as WorkerInit;
const kernels = await instantiateKernels(init.memory, init.module);
const buf = init.memory.buffer as unknown as SharedArrayBuffer;
const req = Ring.attach(buf, init.reqRing);
const cpl = Ring.attach(buf, init.cplRing);
const rw = req.u32;
const cw = cpl.u32;
parentPort!.postMessage({ ready: true });

let stop = false;
while (!stop) {
  const n = req.available();
  if (n === 0) {
    req.waitReadable();
    continue;
  }
  let k = 0;
  while (k < n) {
    let room = cpl.reserve(n - k);
    if (room === 0) {
      cpl.waitWritable(1);
      continue;
    }
    for (let j = 0; j < room; j++) {
      const o = req.peekWord(j); // relative to the tail, which advances with every release below
      const op = rw[o + REQ_OP]!;
      const r = runJob(kernels, rw, o);
      const c = cpl.wordOf(j);
      cw[c + CPL_ID] = rw[o + REQ_ID]!;
      cw[c + CPL_STATUS] = r.status;
      cw[c + CPL_RESULT] = r.result;
      cw[c + CPL_OP] = op;
      if (op === JobOp.Stop) {
        stop = true;
        room = j + 1;
        break;
      }
    }
    cpl.publish(room);
    req.release(room);
    k += room;
    if (stop) break;
  }
}
