// A segment arrives: it is checked against the QP, the flow and the message it belongs to —
// every field the peer sent, before any work proportional to it — and then taken in the way
// its opcode's row says (opcodes.ts `arrive`): placed at a peer-named STag, at the sinks of one
// of our reads, into a posted receive, or kept as a control payload. Completion happens later,
// in ssn order (responder.ts).
import type { DeviceAddress } from '../core/address.js';
import { QpState, WcStatus } from '../core/enums.js';
import type { DdpHdr, SegFrame } from '../core/frame.js';
import { decodeDdp, decodeTerminate, encodeTerminate, Qn, RdmapOpcode, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN } from '../wire/rdmap.js';
import { ctlFrame } from './segmenter.js';
import { isPeerClosed, TERM } from '../wire/terminate.js';
import { Offsets } from './offsets.js';
import { rowOf } from './opcodes.js';
import { failMsg, flushPlacement, placeInto, placeTagged } from './placement.js';
import { noteWrite, placeWriteAfter } from './write-order.js';
import { drainSq } from './completion.js';
import { applyAck, findFlow, pump, srdFlowIn } from './requester.js';
import { Epoch, epochCheck } from './srd-epoch.js';
import { advance, terminateNow } from './responder.js';
import { RANGE_BYTES } from './bounds.js';
import { hasRoom, newMessageBytes, settle } from './budget.js';
import { recvFor, recvForExpected } from './receives.js';
import { refuse, taken, turnRefused } from './srd-refusal.js';
import type { EngineQp, EngineState, Flow } from './state.js';

/**
 * Messages further ahead than this of the next expected ssn are dropped (a sanity bound on the
 * ssn; the out-of-order state itself is capped per QP by the budget, bounds.ts).
 */
const SSN_WINDOW = 1 << 20;

/** Answers for QPNs that do not exist, at most this many per second per device. */
const NO_QP_ANSWERS_PER_S = 64;

/**
 * The first segment of a Send to a QPN that does not exist here: answer at once with a
 * Terminate (DDP invalid queue: the sender's work completes RemInvReqErr, its flow to that QPN
 * is dropped) rather than let the sender retry until its timeout — as a NIC answers a packet
 * for a QP it lacks. It goes only where the link delivered from (udp: an established context),
 * to the first segment of a Send, and is rate-limited. It names ssn 1: a sender's flow to a
 * QPN that never answered expects exactly that (any other is taken as a duplicate, harmless).
 */
function noSuchQp(e: EngineState, from: DeviceAddress, f: SegFrame): void {
  const env = f.env;
  // Only a flow's first message: a sender that has never heard from that QPN (a connected QP
  // whose peer restarted is left to the transport's restart detection).
  if (env.off !== 0 || env.srcQpn === 0 || env.ssn !== 1) return;
  const h = f.ddp ?? (() => {
    const d = decodeDdp(f.hdr, 0, f.hdr.length);
    return d.ok ? d.value : undefined;
  })();
  if (!h || h.tagged || (h.opcode !== RdmapOpcode.Send && h.opcode !== RdmapOpcode.SendWithImm)) return;
  if (e.now - e.noQpSince >= 1000) {
    e.noQpSince = e.now;
    e.noQpAnswers = 0;
  }
  if (++e.noQpAnswers > NO_QP_ANSWERS_PER_S) return;
  const frame = ctlFrame({
    srcQpn: env.dstQpn, dstQpn: env.srcQpn, ssn: 1, opcode: RdmapOpcode.Terminate, qn: Qn.Terminate, msn: 1, bodyLen: 4, ack: env.ssn - 1,
    body: (buf, o) => encodeTerminate({ ...TERM.invalidQn, m: false, d: false }, buf, o),
  });
  // An srd sender's flow takes only its own epoch (srd-epoch.ts): the answer names the one it asked in.
  if (env.epoch !== undefined) frame.env.epoch = env.epoch;
  e.outbox.push({ to: from, frame });
  e.counters.terminatesSent++;
}

/**
 * The budget charges a message from its first segment until the receive step's end completes
 * it (engine.ts), so one step that brings a long in-order burst (a socket read of thousands of
 * small writes) would fill it with messages that are placed and done, and refuse a peer that
 * never broke its bound. Before an rc refusal: place what is batched and complete the flow's
 * messages that are next. (Not srd: completing there can drop the flow or forget messages,
 * and a refused srd segment is only dropped, sent again by its sender.)
 */
function settleStep(e: EngineState, qp: EngineQp, flow: Flow): void {
  flushPlacement(e);
  touch(e, qp, flow);
  advance(e, qp, flow);
}

const inError = (qp: EngineQp): boolean => qp.state === QpState.Error;


/** A copy of a message already completed (or of an epoch gone): counted, dropped, answered by our ack. */
function dropCopy(e: EngineState, qp: EngineQp, flow: Flow): void {
  e.counters.duplicates++;
  flow.needAck = true;
  touch(e, qp, flow);
}

/** The flow needs its in-order step (and maybe an ack) at the end of this receive step. */
export function touch(e: EngineState, qp: EngineQp, flow: Flow): void {
  e.touch(flow, qp);
}

export function onSeg(e: EngineState, from: DeviceAddress, key: string, f: SegFrame, settled = false): void {
  const env = f.env;
  const qp = e.qps.get(env.dstQpn);
  if (!qp || !qp.live) {
    e.counters.drops++;
    if (!qp) noSuchQp(e, from, f);
    return;
  }
  const flow = qp.type === 'rc' ? findFlow(qp, key, env.srcQpn) : srdFlowIn(e, qp, from, env.srcQpn, key, env.epoch);
  if (!flow) {
    e.counters.drops++;
    return;
  }
  flow.lastHeard = e.now;
  if (qp.type === 'srd') {
    const c = epochCheck(e, qp, flow, env.epoch, env.ssn);
    // A copy from before a restart (srd-epoch.ts): dropped, and our ack tells its sender the epoch.
    if (c === Epoch.Stale) return dropCopy(e, qp, flow);
    if (c === Epoch.Restarted) {
      drainSq(e, qp);
      pump(e, qp);
    }
  }
  // Already completed: a stale copy must never be placed again (a later write may have won).
  if (!Number.isSafeInteger(env.ssn) || env.ssn < flow.expected) return dropCopy(e, qp, flow);
  // Only a message not yet completed counts as the peer's direction being busy: a late copy
  // arriving after the sender's last ack must not make us refuse the restart its sender makes
  // once idle for srdIdleMs from that ack (srd-epoch.ts outIdle), or its new messages below
  // our expected ssn are taken for copies and acknowledged.
  flow.lastSegIn = e.now;
  // msgLen -1: not known yet. A byte-exact stream (TCP) learns a message's length only from the
  // segment with the DDP L flag; the link then passes msgLen on that segment.
  if (env.ssn >= flow.expected + SSN_WINDOW || !(env.msgLen >= -1 && env.msgLen <= 0xffff_ffff) || !(env.off >= 0)) {
    e.counters.drops++;
    return;
  }
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
  if (qp.type === 'srd' && env.ssn !== flow.expected && turnRefused(flow)) {
    // The flow's turn was refused: a later message is asked for again in its turn.
    refuse(qp, flow, env.ssn);
    touch(e, qp, flow);
    return;
  }
  let m = flow.pending.get(env.ssn);
  // The out-of-order budget (bounds.ts), before any work for this segment: a new message
  // record, a new range of a message with gaps, a control payload kept until it is next.
  const ctlBytes = h && !h.tagged && rowOf(h.opcode)?.arrive === 'control' ? plen : 0;
  const needE = !m ? 1 : m.offs.joins(env.off, plen) ? 0 : 1;
  const needB = (!m ? newMessageBytes(hlen) : needE * RANGE_BYTES) + ctlBytes;
  // srd: the record of the message a flow waits for is always taken in (past the budget by at
  // most one record per flow). The budget is shared by every flow of the QP, and a peer that
  // never sends its flow's next message holds what it filled for good: without this every
  // other peer of the QP (the CM agent's included) was refused from then on. Its later
  // segments that open new ranges are charged as any.
  const turn = qp.type === 'srd' && !m && env.ssn === flow.expected;
  if ((needE > 0 || needB > 0) && !turn && !hasRoom(e, qp, needE, needB)) {
    // rc: the messages this step placed may be complete and next. Completed now, the segment is
    // taken again from the top (its message may have completed meanwhile); a QP that failed
    // meanwhile has sent its Terminate.
    if (!settled && qp.type === 'rc') {
      settleStep(e, qp, flow);
      if (inError(qp)) e.counters.drops++;
      else onSeg(e, from, key, f, true);
      return;
    }
    e.counters.oooRefused++;
    // rc: the peer broke the stream's resources (RFC 5040 §7: RDMAP, remote operation error);
    // srd: the message is refused as one that found no receive (srd-refusal.ts) and asked for
    // again by an RNR NAK in its turn (every srd message keeps its frames until acked): a peer
    // holding the budget with a gap it never closes costs another peer's pipelined messages a
    // round trip each, not their failure (they were dropped, and failed RetryExcErr).
    if (qp.type === 'rc') terminateNow(e, qp, flow, TERM.outOfOrderLimit, hdr.slice(0, h ? hlen : 0), plen);
    else {
      refuse(qp, flow, env.ssn);
      touch(e, qp, flow);
    }
    return;
  }
  if (env.ack !== undefined) applyAck(flow, env.ack, e.now);
  touch(e, qp, flow);
  if (m && env.ack !== undefined) m.ackHint = env.ack;
  if (!m) {
    m = {
      ssn: env.ssn, msgLen: env.msgLen, got: 0, offs: new Offsets(), seen: false, opcode: h ? h.opcode : -1,
      // ackHint always present (undefined without an ack): one shape, and no spread object per message.
      msn: 0, ulp: 0, hdrLen: 0, segLen: 0, rnrArmed: false, rnrNaked: false, held: 0, heldEntries: 0, ackHint: env.ack, stag: 0, toBase: -1,
    };
    flow.pending.set(env.ssn, m);
    settle(qp, m);
    if (qp.type === 'srd') taken(flow, env.ssn);
  }
  if (m.fail) return;
  if (!h) {
    failMsg(m, hdr, plen, error === 'BAD_OPCODE' ? TERM.badOpcode : TERM.invalidRequest);
    return;
  }
  if (!m.seen) {
    m.seen = true;
    m.opcode = h.opcode;
    // The header (and below, a control payload) is borrowed from the frame for this step: a
    // view, copied at the step's end only if the message is still pending then (engine.ts
    // handleFrames, EngineState.borrowed). A data segment's header is all of hdr.
    m.hdr = hdr.length === hlen ? hdr : hdr.subarray(0, hlen);
    e.borrowed[e.borrowedCount++] = m;
    settle(qp, m);
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
      if (!h.tagged) return;
      if (m.toBase < 0) {
        // The message's first byte would lie below TO 0: no valid Write starts there (and a
        // base below 0 would read as "not yet indexed" on every later segment).
        if (h.to < env.off) return failMsg(m, hdr, plen, TERM.baseBounds);
        m.stag = h.stag;
        m.toBase = h.to - env.off;
        if (qp.type === 'rc') noteWrite(flow, m);
      } else if (h.stag !== m.stag || h.to - env.off !== m.toBase) {
        // Every segment of one Write names the same STag and base (RFC 5041: one tagged buffer,
        // TO advancing with the offset); the index of pending Writes protects what its first
        // segment named, so a later one placed elsewhere would escape "a later write wins".
        return failMsg(m, hdr, plen, h.stag !== m.stag ? TERM.invalidStag : TERM.baseBounds);
      }
      // rc: a late segment of an earlier write must not undo what later writes placed.
      if (qp.type === 'rc' && (flow.writes?.maxSsn ?? 0) > env.ssn) placeWriteAfter(e, qp, flow, m, f, h.stag, h.to, plen, row.access!);
      else placeTagged(e, qp, flow, m, f, h.stag, h.to, plen, row.access!);
      return;
    case 'readResponse':
      if (!h.tagged) return;
      if (!isReadSink(flow, h.stag, h.to, plen)) return failMsg(m, hdr, plen, TERM.invalidStag, WcStatus.LocProtErr);
      if (plen === 0) {
        // The answer to a zero-length RFC Read Request: nothing to place.
        m.offs.add(env.off, 0);
        return;
      }
      placeTagged(e, qp, flow, m, f, h.stag, h.to, plen, row.access!, WcStatus.LocProtErr);
      return;
    case 'receive': {
      const r = qp.type === 'srd' && env.ssn === flow.expected ? recvForExpected(qp, m, flow) : recvFor(qp, m, flow);
      if (r === null) return failMsg(m, hdr, plen, TERM.invalidMsn);
      if (r === undefined) {
        if (qp.type === 'srd') refuse(qp, flow, env.ssn);
        else m.rnrArmed = true;
        return;
      }
      if ((m.msgLen >= 0 ? m.msgLen : env.off + plen) > r.total) return failMsg(m, hdr, plen, TERM.messageTooLong, WcStatus.LocLenErr);
      placeInto(e, qp, flow, m, f, r, plen);
      return;
    }
    case 'control':
      if (f.payload.length > 0 || env.off !== 0) return failMsg(m, hdr, plen, TERM.invalidRequest);
      // Borrowed as the header is (its message was seen in this step: a control message is one segment).
      m.ctl = hdr.subarray(hlen);
      m.offs.add(0, plen);
      m.got = plen;
      // rc: a sabre peer's close notice ahead of its turn. What comes before it in order still
      // lands (the closing side's link sends it again until taken); only a turn that waits for a
      // receive never comes again — that peer flushed the Send — and would hold the notice for
      // good: responder.ts advance acts on the notice then.
      if (qp.type === 'rc' && h.opcode === RdmapOpcode.Terminate && env.ssn > flow.expected && peerClosedNotice(m.ctl)) flow.closeAhead = true;
      settle(qp, m);
      if (row.recv?.at === 'completion') m.rnrArmed = true;
      return;
    case 'refused':
      failMsg(m, hdr, plen, TERM.badOpcode);
  }
}

function peerClosedNotice(ctl: Uint8Array): boolean {
  const v = decodeTerminate(ctl, 0, ctl.length);
  return v.ok && isPeerClosed(v.value);
}

function isReadSink(flow: Flow, stag: number, to: number, len: number): boolean {
  for (const w of flow.reads.values()) {
    for (const s of w.sinks!) if (s.stag === stag && to >= s.to && to + len <= s.to + s.len) return true;
  }
  return false;
}
