// A segment arrives: it is checked against the QP, the flow and the message it belongs to —
// every field the peer sent, before any work proportional to it — and then taken in the way
// its opcode's row says (opcodes.ts `arrive`): placed at a peer-named STag, at the sinks of one
// of our reads, into a posted receive, or kept as a control payload. Completion happens later,
// in ssn order (responder.ts).
import type { DeviceAddress } from '../core/address.js';
import { WcStatus } from '../core/enums.js';
import type { DdpHdr, SegFrame } from '../core/frame.js';
import { decodeDdp, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN } from '../wire/rdmap.js';
import { TERM } from '../wire/terminate.js';
import { Offsets } from './offsets.js';
import { rowOf } from './opcodes.js';
import { failMsg, placeInto, placeTagged } from './placement.js';
import { applyAck, findFlow, srdFlow } from './requester.js';
import type { EngineQp, EngineState, Flow, InMessage, RecvWork } from './state.js';

/**
 * Messages further ahead than this of the next expected ssn are dropped: the bound on a flow's
 * out-of-order state. (Per-QP and per-flow budgets for out-of-order messages, bytes and srd
 * flows belong here, counted in DeviceCounters.)
 */
const SSN_WINDOW = 1 << 20;

/** The flow needs its in-order step (and maybe an ack) at the end of this receive step. */
export function touch(e: EngineState, qp: EngineQp, flow: Flow): void {
  e.touched.set(flow, qp);
}

export function onSeg(e: EngineState, from: DeviceAddress, key: string, f: SegFrame): void {
  const env = f.env;
  const qp = e.qps.get(env.dstQpn);
  if (!qp || !qp.live) {
    e.counters.drops++;
    return;
  }
  const flow = qp.type === 'rc' ? findFlow(qp, key, env.srcQpn) : srdFlow(qp, from, env.srcQpn, key);
  if (!flow) {
    e.counters.drops++;
    return;
  }
  flow.lastHeard = e.now;
  if (!Number.isSafeInteger(env.ssn) || env.ssn < flow.expected) {
    // Already completed: a stale copy must never be placed again (a later write may have won).
    e.counters.duplicates++;
    flow.needAck = true;
    touch(e, qp, flow);
    return;
  }
  // msgLen -1: not known yet. A byte-exact stream (TCP) learns a message's length only from the
  // segment with the DDP L flag; the link then passes msgLen on that segment.
  if (env.ssn >= flow.expected + SSN_WINDOW || !(env.msgLen >= -1 && env.msgLen <= 0xffff_ffff) || !(env.off >= 0)) {
    e.counters.drops++;
    return;
  }
  if (env.ack !== undefined) applyAck(flow, env.ack);
  touch(e, qp, flow);
  let m = flow.pending.get(env.ssn);
  if (m && env.ack !== undefined) m.ackHint = env.ack;
  const hdr = f.hdr;
  // The header is decoded once: by the link that had to read it, or here.
  let h: DdpHdr | undefined = f.ddp;
  let hlen = h ? (h.tagged ? TAGGED_HDR_LEN : UNTAGGED_HDR_LEN) : 0;
  let error = '';
  if (!h) {
    const d = decodeDdp(hdr, 0, hdr.length);
    if (d.ok) {
      h = d.value;
      hlen = d.length;
    } else error = d.error;
  }
  let plen = hdr.length - (h ? hlen : hdr.length);
  for (const p of f.payload) plen += p.length;
  if (!m) {
    m = {
      ssn: env.ssn, msgLen: env.msgLen, got: 0, offs: new Offsets(), seen: false, opcode: h ? h.opcode : -1,
      msn: 0, ulp: 0, hdrLen: 0, segLen: 0, rnrArmed: false, ...(env.ack !== undefined ? { ackHint: env.ack } : {}),
    };
    flow.pending.set(env.ssn, m);
  }
  if (m.fail) return;
  if (!h) {
    failMsg(m, hdr, plen, error === 'BAD_OPCODE' ? TERM.badOpcode : TERM.invalidRequest);
    return;
  }
  if (!m.seen) {
    m.seen = true;
    m.opcode = h.opcode;
    m.hdr = hdr.slice(0, hlen);
    m.hdrLen = hlen;
    m.segLen = plen;
    if (!h.tagged) {
      m.msn = h.msn;
      m.ulp = h.ulp;
    }
  } else if (h.opcode !== m.opcode || (env.msgLen >= 0 && m.msgLen >= 0 && env.msgLen !== m.msgLen)) {
    failMsg(m, hdr, plen, TERM.invalidRequest);
    return;
  }
  if (m.msgLen < 0 && env.msgLen >= 0) m.msgLen = env.msgLen;
  if (env.off + plen > (m.msgLen >= 0 ? m.msgLen : 0xffff_ffff) || (!h.tagged && h.mo !== env.off)) {
    failMsg(m, hdr, plen, h.tagged ? TERM.baseBounds : TERM.invalidMo);
    return;
  }
  const row = rowOf(h.opcode)!;
  if (m.offs.has(env.off)) {
    e.counters.duplicates++;
    if (row.recv?.at === 'completion') m.rnrArmed = true;
    return;
  }
  if (!h.tagged && row.arrive !== 'refused' && h.qn !== row.qn) return failMsg(m, hdr, plen, TERM.invalidQn);
  switch (row.arrive) {
    case 'tagged':
      if (h.tagged) placeTagged(e, qp, flow, m, f, h.stag, h.to, plen, row.access!);
      return;
    case 'readResponse':
      if (!h.tagged) return;
      if (!isReadSink(flow, h.stag, h.to, plen)) return failMsg(m, hdr, plen, TERM.invalidStag, WcStatus.LocProtErr);
      if (plen === 0) {
        // The answer to a zero-length RFC Read Request: nothing to place.
        m.offs.add(env.off);
        return;
      }
      placeTagged(e, qp, flow, m, f, h.stag, h.to, plen, row.access!, WcStatus.LocProtErr);
      return;
    case 'receive': {
      const r = recvFor(qp, m);
      if (r === null) return failMsg(m, hdr, plen, TERM.invalidMsn);
      if (r === undefined) {
        m.rnrArmed = true;
        return;
      }
      if ((m.msgLen >= 0 ? m.msgLen : env.off + plen) > r.total) return failMsg(m, hdr, plen, TERM.messageTooLong, WcStatus.LocLenErr);
      placeInto(e, qp, flow, m, f, r, plen);
      return;
    }
    case 'control':
      if (f.payload.length > 0 || env.off !== 0) return failMsg(m, hdr, plen, TERM.invalidRequest);
      m.ctl = hdr.slice(hlen);
      m.offs.add(0);
      m.got = plen;
      if (row.recv?.at === 'completion') m.rnrArmed = true;
      return;
    case 'refused':
      failMsg(m, hdr, plen, TERM.badOpcode);
  }
}

function isReadSink(flow: Flow, stag: number, to: number, len: number): boolean {
  for (const w of flow.reads.values()) {
    for (const s of w.sinks!) if (s.stag === stag && to >= s.to && to + len <= s.to + s.len) return true;
  }
  return false;
}

/**
 * The receive message `m` takes: rc, the one its MSN names (null: one already consumed — the
 * peer's MSN is out of range); srd, the first unclaimed one. undefined: not posted yet.
 */
export function recvFor(qp: EngineQp, m: InMessage): RecvWork | undefined | null {
  if (m.recv) return m.recv;
  if (qp.type === 'rc') {
    const idx = m.msn - 1 - qp.rqConsumed;
    if (idx < 0) return null;
    return qp.rq.at(idx);
  }
  const r = qp.rq.find((x) => !x.claimed);
  if (r) {
    r.claimed = true;
    m.recv = r;
  }
  return r;
}
