// The sender over a write path with a slot stage (RdmaWritePath.slotStage): the object is kept in
// allocated device memory, never in a region staged for it, and each slot's run is copied into
// the stage and written as one piece. A receiver whose slots exceed the stage bound gets the
// object staged whole; a path with no room for the stage fails the transfer (no hang).
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { DedupReceiver, DedupSender, type MessagePipe, type RdmaWritePath } from '../../src/dedup/endpoint.js';
import { ChunkStore } from '../../src/dedup/store.js';
import { same } from './cores.js';

let dm: DeviceMemory;
beforeAll(async () => {
  dm = await DeviceMemory.create({ initialBytes: 32 << 20, maximumBytes: 256 << 20, workerSlots: 0 });
});

const KEY = new Uint8Array(32).fill(9);
const AVG = 8192;

function pipes(): { tx: MessagePipe; rx: MessagePipe } {
  let onRx: (b: Uint8Array) => void = () => undefined;
  let onTx: (b: Uint8Array) => void = () => undefined;
  return {
    tx: { send: (b) => void queueMicrotask(() => onRx(b)), onMessage: (h) => void (onTx = h) },
    rx: { send: (b) => void queueMicrotask(() => onTx(b)), onMessage: (h) => void (onRx = h) },
  };
}

/** A write path that copies in device memory; `room: false`: it has no memory for a slot stage. */
function path(room = true) {
  const seen = { staged: 0, slotStages: [] as number[], writes: 0, pieces: 0, outside: 0 };
  let stage = 0;
  let slots: { addr: number; len: number } | undefined;
  const w: RdmaWritePath & { free(): void } = {
    stage(bytes) {
      seen.staged++;
      if (stage) dm.free(stage);
      stage = dm.alloc(Math.max(1, bytes.length));
      dm.u8().set(bytes, stage);
      return stage;
    },
    slotStage(bytes) {
      seen.slotStages.push(bytes);
      if (!room) return undefined;
      slots ??= { addr: dm.alloc(bytes), len: bytes };
      return { addr: slots.addr };
    },
    async write(pieces) {
      seen.writes++;
      for (const p of pieces) {
        seen.pieces++;
        const inSlots = slots && p.src >= slots.addr && p.src + p.len <= slots.addr + slots.len;
        if (!inSlots && !(stage && p.src >= stage)) seen.outside++;
        dm.u8().copyWithin(p.remoteAddr, p.src, p.src + p.len);
      }
    },
    free: () => {
      if (stage) dm.free(stage);
      if (slots) dm.free(slots.addr);
    },
  };
  return { w, seen };
}

function ends(store: ChunkStore, w: RdmaWritePath, zoneBytes = 4 << 20) {
  const p = pipes();
  const zone = { addr: dm.alloc(zoneBytes), rkey: 0x4321, length: zoneBytes };
  const rx = new DedupReceiver({ pipe: p.rx, mem: dm, store, scope: 'p', zone, slots: 4, key: KEY, avg: AVG, keepReceived: false });
  const tx = new DedupSender({ pipe: p.tx, rdma: w, mem: dm, step: 256 << 10 });
  return { rx, tx, close: () => (rx.close(), tx.close(), dm.free(zone.addr)) };
}

function versions(n: number): { v1: Uint8Array; v2: Uint8Array } {
  const v1 = new Uint8Array(randomBytes(n));
  const v2 = v1.slice();
  for (let at = 0; at < n; at += 2 << 20) v2.set(randomBytes(Math.min(1 << 20, n - at)), at);
  return { v1, v2 };
}

const source = (v: Uint8Array) => ({
  length: v.length,
  read: async (into: Uint8Array, at: number) => {
    const n = Math.min(into.length, v.length - at);
    into.set(v.subarray(at, at + n));
    return n;
  },
});

describe('a sender over a path with a slot stage', () => {
  it('stages no object: each slot run is copied into the stage and written as one piece; exact, for bytes and a source', async () => {
    const store = new ChunkStore(dm);
    const { v1, v2 } = versions(6 << 20);
    store.ingest('p', v1, { key: KEY, avg: AVG }, { reference: true });
    const { w, seen } = path();
    const e = ends(store, w);
    for (const obj of [v2, source(v2)]) {
      const [r, { bytes }] = await Promise.all([e.tx.send(obj), e.rx.next()]);
      expect(same(bytes, v2)).toBe(true);
      expect(r.bytesSent).toBeLessThan(v2.length * 0.56);
      expect(seen.writes).toBeGreaterThan(0);
    }
    expect(seen.staged).toBe(0);
    expect(seen.slotStages.every((b) => b === 4 << 20)).toBe(true);
    expect(seen.pieces).toBe(seen.writes); // one piece per slot run
    expect(seen.outside).toBe(0);
    e.close();
    w.free();
    store.close();
  });

  it('a receiver whose slots exceed the stage bound gets the object staged whole (exact)', async () => {
    const store = new ChunkStore(dm);
    const { v1, v2 } = versions(6 << 20);
    store.ingest('p', v1, { key: KEY, avg: AVG }, { reference: true });
    const { w, seen } = path();
    const e = ends(store, w, 32 << 20);
    const [, { bytes }] = await Promise.all([e.tx.send(source(v2)), e.rx.next()]);
    expect(same(bytes, v2)).toBe(true);
    expect(seen.staged).toBe(1);
    expect(seen.slotStages).toEqual([]);
    e.close();
    w.free();
    store.close();
  });

  it('a path with no room for the stage fails the transfer instead of hanging', async () => {
    const store = new ChunkStore(dm);
    const { v2 } = versions(2 << 20);
    const { w } = path(false);
    const e = ends(store, w);
    const got = e.rx.next().catch((x: Error) => x);
    await expect(e.tx.send(v2)).rejects.toThrow(/slot stage/);
    await got;
    e.close();
    w.free();
    store.close();
  });
});
