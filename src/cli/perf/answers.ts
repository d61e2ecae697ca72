// What the client takes from the perf server's control answers, checked before use: the peer at
// the control port may be anything (an old or foreign server, a hostile one), and an answer of
// the wrong shape used as it came made TypeErrors ("Cannot read properties of null") of what is
// one clear sentence: the perf server's <call> is malformed.
import type { BwRow } from './results.js';
import type { SideInfo } from './side.js';

const count = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function malformed(what: string): Error {
  return new Error(`the perf server's ${what} is malformed`);
}

/** A SideInfo's shape: an address object, one {qpn, psn} per QP (`qps` of them), the buffer's counts. Both roles check the other's with it. */
export function sideInfoOk(v: unknown, qps: number): v is SideInfo & { qps: Array<{ qpn: number; psn: number }> } {
  if (!isObject(v) || !isObject(v.address) || !Array.isArray(v.qps) || v.qps.length !== qps) return false;
  if (!v.qps.every((q) => isObject(q) && count(q.qpn) && count(q.psn))) return false;
  return [v.rkey, v.vaddr, v.length, v.slotBytes, v.slots].every(count);
}

/** The hello's SideInfo: the device address, one {qpn, psn} per QP we asked for, the buffer. */
export function checkHello(v: unknown, qps: number): SideInfo {
  if (!sideInfoOk(v, qps)) throw malformed('hello');
  return v;
}

/** finish: null, or (under -b) the row of the server's own direction, whose numbers we add to ours. */
export function checkFinishRow(v: unknown): BwRow | null {
  if (v === null) return null;
  const num = (x: unknown): boolean => typeof x === 'number' && Number.isFinite(x) && x >= 0;
  if (!isObject(v) || v.kind !== 'bw' || ![v.iterations, v.seconds, v.bwPeakMiBs, v.bwAvgMiBs, v.bwPeakGbs, v.bwAvgGbs, v.msgRateMpps].every(num)) throw malformed('finish row');
  return v as unknown as BwRow;
}

/** cpu: process.cpuUsage() of the server (microseconds). */
export function checkCpu(v: unknown): NodeJS.CpuUsage {
  if (!isObject(v) || !count(v.user) || !count(v.system)) throw malformed('cpu answer');
  return v as unknown as NodeJS.CpuUsage;
}
