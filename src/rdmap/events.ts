// What the engine tells its shell, polled (pollEvent) after each step, as quinn-proto's
// Connection::poll does: the shell resolves promises and drives its link from them, so the
// engine holds no callbacks of anyone's.
import type { CompletionSink } from '../core/work.js';

export type EngineEvent =
  /** rc QP `qpn` reached RTS: its connect() resolves. */
  | { kind: 'connected'; qpn: number }
  /**
   * QP `qpn` entered ERROR; `fatal` when it did so by itself (a protocol error, a lost peer, a
   * CQ overrun) rather than by modify/destroy: an ibverbs IBV_EVENT_QP_FATAL. A connection
   * link closes the QP's connection. `cause` 'closed': the peer destroyed its QP or closed
   * its device (its close notice came); 'lost': nothing heard from the peer's engine within
   * the QP's timeoutMs (the watchdog), as when the link finds the peer gone.
   */
  | { kind: 'qpError'; qpn: number; fatal: boolean; cause?: 'closed' | 'lost' }
  /** A completion found `cq` full: the CQ overran (ibverbs IBV_EVENT_CQ_ERR). */
  | { kind: 'cqError'; cq: CompletionSink };
