// What both roles print: perftest's header block, the table head, one line per result row (the
// baseline's with a note saying what it was and how it compares), -H histograms, --output.
import { bwColumns, headerLine, hex, latColumns, line, RULE } from '../table.js';
import type { PeerParams } from './options.js';
import type { BwRow, LatRow, Row } from './results.js';
import type { SideInfo } from './side.js';
import { testTitle } from './tests.js';

export type Out = (line: string) => void;

export interface HeaderInfo {
  p: PeerParams;
  mtu: number | undefined;
  workers: number;
  local: SideInfo;
  remote: SideInfo;
  /** The integrity settled with the peer and what this side asked for (integrityOf); absent: not shown. */
  integrity?: string | undefined;
}

/**
 * What integrity the device's peer connections settled on (docs/integrity.md) and what it
 * asked for, e.g. "xxh3 (asked none)"; undefined for inproc (nothing crosses a wire). udp
 * counts contexts per mode, tcp connections by MPA CRC on / off (dev.stats().link).
 */
export function integrityOf(dev: { readonly integrity?: string | undefined; stats(): { link?: Record<string, number> | undefined } }): string | undefined {
  const asked = dev.integrity;
  if (asked === undefined) return undefined;
  const l = dev.stats().link ?? {};
  const by: Array<[string, number | undefined]> = l.mpaCrcOn !== undefined
    ? [['crc32c', l.mpaCrcOn], ['none', l.mpaCrcOff]]
    : [['xxh3', l.contextsXxh3], ['crc32c', l.contextsCrc32c], ['none', l.contextsNone]];
  const used = by.filter(([, n]) => (n ?? 0) > 0).map(([m]) => m);
  return used.length === 0 ? `${asked} asked (not settled yet)` : `${used.join(' + ')} (asked ${asked})`;
}

export function printHeader(h: HeaderInfo, out: Out): void {
  const { p } = h;
  const addr = (who: string, s: SideInfo, i: number) =>
    ` ${who} address: LID 0000 QPN ${hex(s.qps[i]!.qpn, 4)} PSN ${hex(s.qps[i]!.psn, 6)} RKey ${hex(s.rkey >>> 0, 8)} VAddr ${hex(s.vaddr, 14)}`;
  out(RULE);
  out(`                    ${testTitle(p)}`);
  out(` Dual-port       : OFF\t\tDevice         : sabre_${p.transport}`);
  out(` Number of qps   : ${p.qps}\t\tTransport type : ${p.transport.toUpperCase()}`);
  out(` Connection type : ${p.conn.toUpperCase()}\t\tUsing SRQ      : OFF`);
  if (p.kind === 'bw') out(` TX depth        : ${p.txDepth}`);
  if (p.verb === 'send' || (p.verb === 'write' && p.imm)) out(` RX depth        : ${p.rxDepth}`);
  if (p.kind === 'bw') out(` CQ Moderation   : ${p.cqMod}`);
  out(` Mtu             : ${h.mtu !== undefined ? `${h.mtu}[B]` : 'n/a'}`);
  out(` Link type       : ${p.transport === 'inproc' ? 'Memory' : 'Ethernet'}`);
  if (p.verb !== 'read' && p.verb !== 'atomic') out(` Max inline data : ${p.inline}[B]`);
  if (p.verb === 'read' || p.verb === 'atomic') out(` Outstand reads  : ${p.outs ?? 16}`);
  if (p.transport !== 'inproc') out(` NIC threads     : ${h.workers}`);
  if (h.integrity !== undefined) out(` Integrity       : ${h.integrity}`);
  out(` rdma_cm QPs     : OFF`);
  out(` Data ex. method : ${p.transport === 'inproc' ? 'Direct' : 'Ethernet'}`);
  out(RULE);
  for (let i = 0; i < h.local.qps.length; i++) {
    out(addr('local', h.local, i));
    out(addr('remote', h.remote, i));
  }
  out(RULE);
}

export function tableHead(p: PeerParams): string {
  return headerLine(p.kind === 'bw' ? bwColumns(p.reportGbits, p.cpuUtil) : latColumns(p.cpuUtil));
}

const f2 = (v: number) => v.toFixed(2);

function cells(p: PeerParams, r: Row): string[] {
  if (r.kind === 'bw') {
    const b = r as BwRow;
    const c = [String(b.bytes), String(b.iterations), f2(p.reportGbits ? b.bwPeakGbs : b.bwPeakMiBs), f2(p.reportGbits ? b.bwAvgGbs : b.bwAvgMiBs), b.msgRateMpps.toFixed(6), b.cpuSecPerGB !== undefined ? b.cpuSecPerGB.toFixed(3) : '-'];
    if (p.cpuUtil) c.push(b.cpuUtilPct !== undefined ? f2(b.cpuUtilPct) : '-');
    return c;
  }
  const l = r as LatRow;
  const c = [String(l.bytes), String(l.iterations), f2(l.tMin), f2(l.tMax), f2(l.tTypical), f2(l.tAvg), f2(l.tStdev), f2(l.p99), f2(l.p999)];
  if (p.cpuUtil) c.push(l.cpuUtilPct !== undefined ? f2(l.cpuUtilPct) : '-');
  return c;
}

/** What a baseline row's #iterations count. */
function iterationsMean(p: PeerParams, r: Row): string {
  if (r.source === 'node:dgram') return p.kind === 'bw' ? 'messages acked (ack-clocked window)' : 'round trips answered';
  if (r.source === 'node:net') return p.kind === 'bw' ? 'messages written and counted in' : 'round trips';
  return 'copies';
}

export function rowLine(p: PeerParams, r: Row): string {
  const cols = p.kind === 'bw' ? bwColumns(p.reportGbits, p.cpuUtil) : latColumns(p.cpuUtil);
  const text = line(cols, cells(p, r));
  if (r.source === 'sabre') return text;
  const loss = r.lossPct !== undefined ? `, ${r.lossPct.toFixed(1)}% lost` : '';
  const ratio = r.speedRatio !== undefined ? `; sabre÷baseline speed ${r.speedRatio.toFixed(2)}` : '';
  return `${text}   <- baseline ${r.source}: #iterations = ${iterationsMean(p, r)}${loss}${ratio}`;
}

/** perftest -H / -U: "#, usec" then one "i, value" line per sample. */
export function histogram(samplesUs: readonly number[], sorted: boolean, out: Out): void {
  const v = sorted ? [...samplesUs].sort((a, b) => a - b) : samplesUs;
  out('#, usec');
  v.forEach((x, i) => out(`${i + 1}, ${Number(x.toPrecision(6))}`));
}

/** --output: just the number. */
export function outputValue(kind: 'bandwidth' | 'message_rate' | 'latency', p: PeerParams, r: Row): string {
  if (kind === 'latency') return (r as LatRow).tTypical.toFixed(2);
  const b = r as BwRow;
  return kind === 'bandwidth' ? (p.reportGbits ? b.bwAvgGbs : b.bwAvgMiBs).toFixed(6) : b.msgRateMpps.toFixed(6);
}
