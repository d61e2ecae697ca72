// What the peer at the other end of a QP speaks, and so what the engine may ask of it. Links
// report it (tcp learns it from the MPA exchange; the peer of a udp or inproc device is always a
// sabre device); the engine, the verbs checks and the tcp framing act on its two flags. This is
// the one place the "standard iWARP peer vs sabre peer" policy is written down.
export interface PeerProfile {
  readonly name: 'sabre' | 'iwarp';
  /**
   * sabre's extension opcodes (12 SendWithImm, 13 ReadRequestV, 14 ReadComplete, 15 the tcp
   * control message) may be sent to it and are accepted from it. Without them: an RdmaRead goes
   * as RFC 5040 Read Requests (one per source/sink piece) and completes on the Read Response
   * with L; the peer's Read Requests are answered with Read Responses only; RdmaWriteWithImm
   * uses RFC 7306 Immediate Data; SendWithImm is refused at post time (NotSupported); an
   * extension opcode arriving from it is a Terminate (RDMAP opcode error).
   */
  readonly extensions: boolean;
  /**
   * The peer's engine acknowledges what it placed (ack frames) and answers a Send that finds no
   * receive with RNR. Then a Write or Send completes at the requester only once placed and
   * visible at the responder (DESIGN §4). Without: Writes and Sends complete once the link has
   * written them out (LinkEvents.written: the kernel took their bytes), as iWARP defines it and
   * siw does; no acks go to the peer; a Send that finds no posted receive is
   * fatal (Terminate, DDP untagged buffer error "no buffer"), as RFC 5040 says.
   */
  readonly acks: boolean;
}

export const SABRE_PEER: PeerProfile = Object.freeze({ name: 'sabre', extensions: true, acks: true });
export const STANDARD_IWARP_PEER: PeerProfile = Object.freeze({ name: 'iwarp', extensions: false, acks: false });
