// Receiver not ready: what a device that holds its input (RdmapEngine.holdReceive) tells its
// peers, and what a peer does when told. The holder's link drops or leaves unread what peers
// send; their requester watchdogs (requester.ts) would take the silence for a dead peer and
// fail their QPs. So every NOT_READY_MS the holder sends each peer end it has flows with one
// device-wide ack (both QPNs DEVICE_QPN, ssn 0): it completes nothing, and the peer's engine
// counts it as hearing from this device on every flow it has to it — as TCP's zero window says
// "alive, not ready" without ever giving up. One word per peer end, not per flow: a device with
// 10,000 QPs held would otherwise send 20,000 frames a second. A peer end is an address key:
// one socket of a device (a device of several NIC threads has one per thread, and each thread's
// flows name the socket they talk to). tcp carries no device-wide word (each QP is its own
// connection): its link sends one control ack per connection instead (transport/tcp/link.ts).
//
// The receiving side remembers when each peer end last said so (EngineState.notReadyFrom). Only
// a peer end this engine has a flow to is remembered (EngineState.peerEnds, kept as flows come
// and go): the word matters for nothing else, and a table any source could fill would let forged
// sources push out a real peer's entry — its flows' watchdogs would then fire while it holds.
// Past NOT_READY_PEERS_MAX (a device with flows to that many peer ends) the least recently heard
// goes: a peer that holds says so again within NOT_READY_MS and is back.
import { DEVICE_QPN } from '../core/frame.js';
import type { EngineState, Flow } from './state.js';

/** How often (ms) a device that holds its input tells each peer it is alive (notReady). */
export const NOT_READY_MS = 500;

/** The peer ends remembered as having said they are not ready; the least recent go first past it. */
const NOT_READY_PEERS_MAX = 4096;

/** The device holds its input: one device-wide ack to each peer end that a live flow speaking acks talks to. */
export function notReady(e: EngineState): void {
  const told = new Set<string>();
  for (const qp of e.qps.values()) {
    if (!qp.live) continue;
    for (const flow of qp.allFlows()) {
      if (!flow.profile.acks || told.has(flow.peerKey)) continue;
      told.add(flow.peerKey);
      e.counters.notReadySent++;
      e.outbox.push({ to: flow.peer, frame: { kind: 'ack', srcQpn: DEVICE_QPN, dstQpn: DEVICE_QPN, ssn: 0 } });
    }
  }
}

/** The peer end `key` said it is alive and not ready: every flow to it counts as heard from now (watchdogHeard). */
export function heardNotReady(e: EngineState, key: string): void {
  if (!e.peerEnds.has(key)) {
    e.counters.notReadyRefused++;
    return;
  }
  const m = e.notReadyFrom;
  m.delete(key);
  m.set(key, e.now);
  if (m.size > NOT_READY_PEERS_MAX) {
    m.delete(m.keys().next().value!);
    e.counters.notReadyEvicted++;
  }
}

/** `flow` came to be: its peer end's not-ready words are taken (heardNotReady). */
export function flowMade(e: EngineState, flow: Flow): void {
  if (flow.inPeerEnds) return;
  flow.inPeerEnds = true;
  e.peerEnds.set(flow.peerKey, (e.peerEnds.get(flow.peerKey) ?? 0) + 1);
}

/** `flow` is gone (a QP reset or destroyed, an srd flow dropped): the last one to a peer end takes its entries with it. */
export function flowGone(e: EngineState, flow: Flow): void {
  if (!flow.inPeerEnds) return;
  flow.inPeerEnds = false;
  const n = (e.peerEnds.get(flow.peerKey) ?? 1) - 1;
  if (n > 0) {
    e.peerEnds.set(flow.peerKey, n);
    return;
  }
  e.peerEnds.delete(flow.peerKey);
  e.notReadyFrom.delete(flow.peerKey);
}

/** When the peer of a flow was last heard from: its own answers, or its device-wide not-ready word. */
export function watchdogHeard(e: EngineState, peerKey: string, lastHeard: number): number {
  const t = e.notReadyFrom.get(peerKey);
  return t === undefined || t < lastHeard ? lastHeard : t;
}
