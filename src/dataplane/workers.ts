// The worker data plane: N worker_threads, each instantiating the module over the device's
// memory, each fed through its own request ring and answering through its own completion
// ring (both SPSC rings in the device memory map). The event-loop side submits jobs (batches
// of kernel work described by pointers into device memory) and a per-worker pump, asleep in
// Atomics.waitAsync, resolves them as completions arrive.
import { Worker } from 'node:worker_threads';
import { ErrorCode, SabreError } from '../core/errors.js';
import { Lifecycle, type Settle } from '../core/lifecycle.js';
import type { DeviceMemory } from './device-memory.js';
import { CPL_ID, CPL_RESULT, CPL_STATUS, type Job, JobOp, type JobResult, REQ_ARGS, REQ_ID, REQ_MAX_ARGS, REQ_OP } from './jobs.js';
import { Ring } from './ring.js';
import type { WorkerInit } from './worker-main.js';
import { workerScript } from './worker-url.js';

interface Lane {
  worker: Worker;
  req: Ring;
  cpl: Ring;
  exited: Promise<void>;
}

const claimed = new WeakMap<DeviceMemory, boolean>();

export class DataPlaneWorkers {
  readonly size: number;
  readonly #lanes: Lane[];
  /** Job id → its result's promise, owed by #life: close() and a failed worker settle them all. */
  readonly #pending = new Map<number, Settle<JobResult>>();
  readonly #dm: DeviceMemory;
  #nextId = 1;
  #rr = 0;
  readonly #life = new Lifecycle(() => new SabreError(ErrorCode.Closed, 'worker data plane is closed'));
  readonly #pumps: Promise<void>[];

  private constructor(dm: DeviceMemory, lanes: Lane[]) {
    this.#dm = dm;
    this.#lanes = lanes;
    this.size = lanes.length;
    this.#pumps = lanes.map((l) => this.#pump(l));
  }

  /** Start `count` workers (at most the memory map's workerSlots) and wait until each is ready. */
  static async start(dm: DeviceMemory, count = 2): Promise<DataPlaneWorkers> {
    const map = dm.map;
    if (!Number.isInteger(count) || count < 1 || count > map.workerSlots) {
      throw new SabreError(ErrorCode.LimitExceeded, `workers: ${count} requested, the memory map has ${map.workerSlots} worker slots`);
    }
    if (claimed.get(dm)) throw new SabreError(ErrorCode.InvalidState, 'this device memory already runs a worker data plane');
    claimed.set(dm, true);
    const buf = dm.buffer();
    const script = workerScript('worker-main.js');
    const started: Worker[] = [];
    const lanes = await Promise.all(
      Array.from({ length: count }, async (_, i): Promise<Lane> => {
        const reqAddr = map.ringBase + 2 * i * map.ringBytes;
        const cplAddr = reqAddr + map.ringBytes;
        const req = Ring.init(buf, reqAddr, map.ringSlots, map.ringSlotBytes);
        const cpl = Ring.init(buf, cplAddr, map.ringSlots, map.ringSlotBytes);
        const init: WorkerInit = {
          module: dm.module,
          memory: dm.memory,
          reqRing: reqAddr,
          cplRing: cplAddr,
          scratchBase: map.scratchBase + i * map.scratchBytes,
          scratchBytes: map.scratchBytes,
          index: i,
        };
        const worker = new Worker(script, { workerData: init });
        started.push(worker);
        const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
        await new Promise<void>((resolve, reject) => {
          const early = (code: number) => reject(new Error(`data-plane worker ${i} exited with ${code} before it was ready`));
          worker.once('error', reject);
          worker.once('exit', early);
          worker.once('message', () => {
            worker.off('error', reject);
            worker.off('exit', early);
            resolve();
          });
        });
        return { worker, req, cpl, exited };
      }),
    ).catch(async (e) => {
      await Promise.all(started.map((w) => w.terminate()));
      claimed.delete(dm);
      throw e;
    });
    const self = new DataPlaneWorkers(dm, lanes);
    for (const [i, l] of lanes.entries()) {
      l.worker.on('error', (e) => self.#failAll(e));
      l.worker.once('exit', (code) => {
        if (!self.#life.closing) self.#failAll(new SabreError(ErrorCode.InvalidState, `data-plane worker ${i} exited unexpectedly (${code})`));
      });
    }
    return self;
  }

  /** Run one job on a worker (round-robin unless `worker` is given). */
  submit(job: Job, worker?: number): Promise<JobResult> {
    return this.submitBatch([job], worker).then((r) => r[0]!);
  }

  /** Run jobs on one worker; they are published together (one ring store, one wake-up). */
  async submitBatch(jobs: readonly Job[], worker?: number): Promise<JobResult[]> {
    if (this.#life.closing) throw this.#life.closedError();
    const lane = this.#lanes[worker ?? this.#rr++ % this.size];
    if (!lane) throw new SabreError(ErrorCode.InvalidArgument, `no worker ${worker}`);
    return this.#post(lane, jobs);
  }

  async #post(lane: Lane, jobs: readonly Job[]): Promise<JobResult[]> {
    const results: Promise<JobResult>[] = [];
    let k = 0;
    while (k < jobs.length) {
      let room = lane.req.reserve(jobs.length - k);
      if (room === 0) {
        await lane.req.waitWritableAsync(1);
        if (this.#life.closing) {
          // The jobs already published are owed and reject at the close: nobody awaits them now.
          void Promise.all(results).catch(() => {});
          throw this.#life.closedError();
        }
        continue;
      }
      const w = lane.req.u32;
      for (let j = 0; j < room; j++) {
        const job = jobs[k + j]!;
        const o = lane.req.wordOf(j);
        const id = this.#nextId;
        this.#nextId = (this.#nextId % 0x7fff_ffff) + 1;
        w[o + REQ_OP] = job.op;
        w[o + REQ_ID] = id;
        const a = job.args ?? [];
        for (let x = 0; x < REQ_MAX_ARGS; x++) w[o + REQ_ARGS + x] = a[x] ?? 0;
        const { promise, settle } = this.#life.owe<JobResult>();
        this.#pending.set(id, settle);
        results.push(promise);
      }
      lane.req.publish(room);
      k += room;
    }
    return Promise.all(results);
  }

  /**
   * Stop every worker (a Stop job, so in-flight work finishes), wait for them to exit; a job still
   * unanswered then rejects with ERR_CLOSED. Every call returns the first call's promise.
   */
  close(): Promise<void> {
    return this.#life.close(() => this.#stop());
  }

  async #stop(): Promise<void> {
    const stops = this.#lanes.map((l) => this.#post(l, [{ op: JobOp.Stop }]).catch(() => undefined));
    await Promise.race([Promise.all(stops), new Promise((r) => setTimeout(r, 5000).unref())]);
    for (const l of this.#lanes) l.cpl.wakeAll();
    await Promise.all(
      this.#lanes.map(async (l) => {
        const t = setTimeout(() => void l.worker.terminate(), 5000);
        await l.exited;
        clearTimeout(t);
      }),
    );
    await Promise.all(this.#pumps);
    this.#pending.clear();
    this.#life.end();
    claimed.delete(this.#dm);
  }

  async #pump(l: Lane): Promise<void> {
    const c = l.cpl;
    const w = c.u32;
    for (;;) {
      const n = c.available();
      if (n === 0) {
        const closing = this.#life.closing;
        if (closing && this.#pending.size === 0) return;
        await c.waitReadableAsync(closing ? 50 : Infinity);
        if (this.#life.closing && c.available() === 0) return;
        continue;
      }
      for (let j = 0; j < n; j++) {
        const o = c.peekWord(j);
        const id = w[o + CPL_ID]!;
        const p = this.#pending.get(id);
        if (p) {
          this.#pending.delete(id);
          p.resolve({ status: w[o + CPL_STATUS]!, result: w[o + CPL_RESULT]! });
        }
      }
      c.release(n);
    }
  }

  #failAll(e: unknown): void {
    this.#pending.clear();
    this.#life.rejectAll(e instanceof Error ? e : new Error(String(e)));
  }
}
