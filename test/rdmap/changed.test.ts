// The engine lists the QPs whose state or queue lengths changed (takeChanged), so a shell
// that mirrors them elsewhere (the NIC thread's control table) visits those, not every QP.
import { describe, expect, it } from 'vitest';
import { QpState } from '../../src/core/enums.js';
import type { WorkCompletion } from '../../src/core/work.js';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { RdmapEngine } from '../../src/rdmap/engine.js';
import { EngineMemory } from '../../src/rdmap/memory.js';
import type { EngineQp, QpCaps } from '../../src/rdmap/state.js';

const CAPS: QpCaps = { maxSendWr: 16, maxRecvWr: 16, maxSge: 1, maxInline: 0, rnrRetry: 7, rnrTimeoutMs: 1, maxRdAtomic: 4, timeoutMs: 8000 };
const cq = { wcs: [] as WorkCompletion[], offer(wc: WorkCompletion) { this.wcs.push(wc); return true; } };

async function engine(track: boolean): Promise<{ eng: RdmapEngine; qps: EngineQp[] }> {
  const dm = await DeviceMemory.create({ workerSlots: 0, initialBytes: 1 << 20 });
  const eng = new RdmapEngine(new EngineMemory(dm), { mss: 1024 });
  if (track) eng.trackChanges();
  const qps = [1, 2, 3, 4].map((n) => eng.createQp(n, 'rc', 1, CAPS, cq, cq));
  return { eng, qps };
}

function changed(eng: RdmapEngine): number[] {
  const seen: number[] = [];
  eng.takeChanged((q) => seen.push(q.qpn));
  return seen;
}

const recv = (id: number) => ({ wrId: id, pieces: [], total: 0, claimed: false });

describe('engine: changed QPs', () => {
  it('lists each QP a post, a connect, an error or a reset touched, once, and then nothing', async () => {
    const { eng, qps } = await engine(true);
    expect(changed(eng)).toEqual([]);
    eng.postRecv(qps[1]!, recv(1), 0);
    eng.postRecv(qps[1]!, recv(2), 0);
    eng.connect(qps[2]!, { transport: 'inproc', id: 'peer' }, 9, 0);
    expect(changed(eng)).toEqual([2, 3]);
    expect(changed(eng)).toEqual([]);
    // ERROR flushes the two receives: the QP's state and its receive queue changed.
    eng.toError(qps[1]!, 1);
    expect(qps[1]!.state).toBe(QpState.Error);
    expect(qps[1]!.rq.length).toBe(0);
    expect(changed(eng)).toEqual([2]);
    eng.reset(qps[1]!);
    expect(changed(eng)).toEqual([2]);
    // Untouched QPs were never listed.
    expect(cq.wcs.filter((w) => w.qpn === 2)).toHaveLength(2);
  });

  it('keeps no list unless asked (nobody would empty it)', async () => {
    const { eng, qps } = await engine(false);
    eng.postRecv(qps[0]!, recv(1), 0);
    eng.toError(qps[3]!, 0);
    expect(changed(eng)).toEqual([]);
  });
});
