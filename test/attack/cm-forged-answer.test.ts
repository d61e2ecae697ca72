// A REQ's answer (REP or REJ) is matched to the request by its id alone. A device that is not the
// one dialled — any peer that can reach our CM QP, off the path of the exchange — sees none of
// our REQs; if it can still guess their ids, a forged REJ fails our connect (ERR_UNREACHABLE)
// and a forged REP connects our QP to a QPN of the attacker's choosing. Ids must not be
// guessable: here the attacker answers the ids 1 … 1000 (every id a fresh device would use
// first) and none of its answers may settle our requests.
import { describe, expect, it } from 'vitest';
import { type CmAction, CmCore } from '../../src/cm/core.js';
import { pollAll } from '../../src/core/sans-io.js';

const enc = new TextEncoder();
const A = { transport: 'udp', host: '127.0.0.1', port: 4791 } as const;
const EVIL = { transport: 'udp', host: '127.0.0.9', port: 4791 } as const;

describe('answers forged by another device', () => {
  it('REJs and REPs for the first 1000 ids from a device never dialled settle nothing; the real REP still does', () => {
    const c = new CmCore();
    const ids = [c.request(A, 7, 100, undefined, 5000, 0), c.request(A, 7, 101, undefined, 5000, 0)];
    const reqs = pollAll(c).filter((a): a is Extract<CmAction, { kind: 'send' }> => a.kind === 'send');
    expect(reqs.length).toBe(2);
    // The attacker does not see the REQs: it guesses.
    for (let id = 1; id <= 1000; id++) {
      c.handleMessage(enc.encode(JSON.stringify({ t: 'rej', id, reason: 'forged' })), EVIL, 1);
      c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 666 })), EVIL, 1);
    }
    expect(pollAll(c).filter((a) => a.kind === 'settled')).toEqual([]);
    // The listener's real answers, with the ids its REQs carried, settle them.
    for (const r of reqs) {
      const id = (JSON.parse(new TextDecoder().decode(r.bytes)) as { id: number }).id;
      c.handleMessage(enc.encode(JSON.stringify({ t: 'rep', id, qpn: 55 })), A, 2);
    }
    const settled = pollAll(c).filter((a): a is Extract<CmAction, { kind: 'settled' }> => a.kind === 'settled');
    expect(settled.map((s) => [s.id, s.value?.qpn])).toEqual([[ids[0], 55], [ids[1], 55]]);
  });
});
