// What the perf server takes from its client's calls, checked before use (answers.ts is the
// client's side of the same care). The control port is open to whoever reaches it: a connect
// that names another host would make the server's QPs dial it, a baselineOpen of the wrong shape
// would size buffers from a negative number or answer a request with 8 MiB, and a report row
// without its numbers would fail in rowLine.
import type { BaselineOpen } from './baseline.js';
import { latShape } from './baseline.js';
import { isObject, sideInfoOk } from './answers.js';
import { normalHost } from './control.js';
import type { PeerParams } from './options.js';
import type { Row } from './results.js';
import type { SideInfo } from './side.js';

const port = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65535;

/**
 * connect's SideInfo: one {qpn, psn} per negotiated QP, the buffer's numbers, and a device address
 * of our transport on the host the control connection came from (`peerHost`; undefined only in
 * process, where the address is the in-process fabric's). Returns a copy holding only those fields.
 */
export function checkConnect(v: unknown, p: PeerParams, transport: string, peerHost: string | undefined): SideInfo {
  if (!sideInfoOk(v, p.qps)) throw new Error(`connect: the client's side is malformed (it must name ${p.qps} QP${p.qps === 1 ? '' : 's'}, its buffer's rkey, vaddr, length, slotBytes and slots)`);
  if (v.slots < 1 || v.slotBytes < 1) throw new Error('connect: the client\'s buffer has no slots');
  const a = v.address as unknown;
  if (!isObject(a) || a.transport !== transport) throw new Error(`connect: the client's device address must be a ${transport} address`);
  let address: Record<string, unknown>;
  if (transport === 'inproc') {
    if (typeof a.id !== 'string' || peerHost !== undefined) throw new Error('connect: the client\'s device address is malformed');
    address = { transport, id: a.id };
  } else {
    if (typeof a.host !== 'string' || !port(a.port)) throw new Error('connect: the client\'s device address is malformed (host, port 1..65535)');
    if (peerHost === undefined || normalHost(a.host) !== normalHost(peerHost)) {
      throw new Error(`connect: the client's device address ${JSON.stringify(a.host)} is not the host of its control connection (${peerHost ?? 'unknown'})`);
    }
    address = { transport, host: a.host, port: a.port };
    if (a.ports !== undefined) {
      if (!Array.isArray(a.ports) || a.ports.length < 2 || a.ports.length > 256 || !a.ports.every(port)) throw new Error('connect: the client\'s device ports are malformed');
      address.ports = [...a.ports];
    }
  }
  return {
    address,
    qps: v.qps.map((q) => ({ qpn: q.qpn, psn: q.psn })),
    rkey: v.rkey,
    vaddr: v.vaddr,
    length: v.length,
    slotBytes: v.slotBytes,
    slots: v.slots,
  };
}

/** baselineOpen: our transport, the test's mode, and for rr the shape one of the run's sizes gives. */
export function checkBaselineOpen(v: unknown, p: PeerParams, transport: string): BaselineOpen {
  const bad = (what: string): never => {
    throw new Error(`baselineOpen: ${what}`);
  };
  if (!isObject(v)) bad('not an object');
  const o = v as Record<string, unknown>;
  if (transport !== 'udp' && transport !== 'tcp') bad(`no raw-socket baseline over ${transport}`);
  if (o.transport !== transport) bad(`transport must be ${transport}`);
  const mode = p.kind === 'lat' ? 'rr' : 'bw';
  if (o.mode !== mode) bad(`mode must be ${mode} for ${p.test}`);
  const { reqBytes, respBytes } = o;
  if (mode === 'bw') {
    if (reqBytes !== 0 || respBytes !== 0) bad('reqBytes and respBytes must be 0 for bw');
  } else if (!p.sizes.some((s) => {
    const shape = latShape(p, s);
    return shape.reqBytes === reqBytes && shape.respBytes === respBytes;
  })) {
    bad(`reqBytes and respBytes must be ${p.test}'s for one of the run's sizes`);
  }
  return { transport: transport as 'udp' | 'tcp', mode, reqBytes: reqBytes as number, respBytes: respBytes as number };
}

const BW_NUMBERS = ['bytes', 'iterations', 'seconds', 'bwPeakMiBs', 'bwAvgMiBs', 'bwPeakGbs', 'bwAvgGbs', 'msgRateMpps'] as const;
const LAT_NUMBERS = ['bytes', 'iterations', 'tMin', 'tMax', 'tTypical', 'tAvg', 'tStdev', 'p99', 'p999'] as const;
const OPTIONAL_NUMBERS = ['speedRatio', 'lostIterations', 'warmUpIterations', 'warmUpMs', 'lossPct', 'bytesToResponder', 'bytesFromResponder', 'cpuSecPerGB', 'cpuUtilPct'] as const;
const MAX_ROW_KEYS = 32;

/**
 * One row of the client's report: of the test's kind, a name of our own alphabet, every number
 * rowLine prints present and finite, no other value a structure or a string outside [\w:.]{0,32}
 * (so a peer cannot write control sequences to this terminal).
 */
export function checkRow(r: unknown, p: PeerParams): Row {
  const bad = (): never => {
    throw new Error('report: a malformed row');
  };
  if (!isObject(r)) bad();
  const o = r as Record<string, unknown>;
  if (o.kind !== p.kind || typeof o.source !== 'string' || !/^[\w:.]{1,32}$/.test(o.source)) bad();
  const keys = Object.keys(o);
  if (keys.length > MAX_ROW_KEYS) bad();
  const num = (x: unknown) => typeof x === 'number' && Number.isFinite(x);
  for (const k of p.kind === 'bw' ? BW_NUMBERS : LAT_NUMBERS) if (!num(o[k])) bad();
  for (const k of OPTIONAL_NUMBERS) if (o[k] !== undefined && !num(o[k])) bad();
  for (const k of keys) {
    const v = o[k];
    if (typeof v === 'object' || typeof v === 'function' || (typeof v === 'string' && !/^[\w:.]{0,32}$/.test(v))) bad();
  }
  return o as unknown as Row;
}
