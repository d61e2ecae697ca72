// An authenticated client that asks for answers by Send but never grants the server a credit to
// send them: every Credit(retire) is answered with a StatusResponse and every InterruptRequest
// for a finished request with an InterruptResponse, and each waits for a send credit. Requests
// that fail at once (an unknown file) complete by RDMA Write, which needs no credit and grants
// the client's credits back, so the client can go on asking for ever: the answers waiting for a
// credit must be bounded, not kept without limit. Driven on the sans-I/O core (the shell only
// carries these actions out), with a real session table and a real key.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { connectionProof, authKey } from '../../src/files/auth.js';
import { writeFields } from '../../src/files/layout.js';
import { type Body, type FileHeader, decodeHeader, encodeToBytes } from '../../src/files/messages.js';
import { DEFAULT_SERVER_LIMITS, type ServerAction, ServerConnection, newServerCounters } from '../../src/files/server-core.js';
import { SessionTable } from '../../src/files/sessions.js';
import { FILE_AUTH_REQ, FileOp } from '../../src/wire/files-spec.js';

const rand = (n: number): Uint8Array => new Uint8Array(randomBytes(n));

describe('answers waiting for a send credit the client never grants', () => {
  it('20 000 retire-Credits and InterruptRequests with no grant: the waiting answers stay bounded (the connection is terminated, counted)', () => {
    const sessions = new SessionTable({}, rand);
    const s = sessions.open(rand(32))!;
    const keyId = sessions.mintKey(s, 0)!;
    const counters = newServerCounters();
    const core = new ServerConnection({ limits: DEFAULT_SERVER_LIMITS, sessions, counters, now: 0, preauthRecvId: 0 });
    let credits = 0;
    let sends = 0;
    let terminated = false;
    const drain = (): void => {
      for (let a: ServerAction | undefined = core.pollAction(); a; a = core.pollAction()) {
        if (a.kind === 'send' || a.kind === 'block') {
          const h = decodeHeader(a.bytes);
          if (h.ok) credits += h.value.creditsGranted;
          if (a.kind === 'send') sends++;
        } else if (a.kind === 'terminate') terminated = true;
      }
    };
    let recvId = 1;
    const msg = (h: Partial<FileHeader> & { opcode: number }, body: Body): void => {
      credits--;
      core.handleReceive(recvId++, encodeToBytes({ flags: 0, creditsRequested: 16, creditsGranted: 0, slot: 0, requestId: 0, info: 0, ...h }, body), 0);
      drain();
    };
    // A valid login that grants the server two credits: the AuthenticateResponse and its StatusResponse.
    const p = { statusAddr: 4096, statusRkey: 7, statusSlots: 64, maxReceiveSize: 256 };
    const tmp = new Uint8Array(FILE_AUTH_REQ.size);
    writeFields(FILE_AUTH_REQ, tmp, 0, p);
    const params = tmp.slice(FILE_AUTH_REQ.fields.statusAddr.offset);
    const nonce = rand(16);
    const mac = connectionProof(authKey(s.kSession, keyId), s.resumeKey, keyId, nonce, params);
    credits = 1;
    msg({ opcode: FileOp.AuthenticateRequest, creditsGranted: 2 }, { op: FileOp.AuthenticateRequest, resumeKey: s.resumeKey, keyId, nonce, mac, params, ...p });
    expect(core.state).toBe('bound');
    expect(sends).toBe(2);
    // Bounded: 20 000 messages at most.
    for (let i = 1; i <= 20_000 && !terminated; i++) {
      expect(credits).toBeGreaterThan(0);
      if (credits >= 2) {
        if (i % 2) msg({ opcode: FileOp.Credit, info: 1 }, { op: FileOp.Credit });
        else msg({ opcode: FileOp.InterruptRequest, info: 0x7fff0000 + i }, { op: FileOp.InterruptRequest });
      } else msg({ opcode: FileOp.Read, requestId: i, slot: 0 }, { op: FileOp.Read, fileId: 999, length: 1, offset: 0, sinkAddr: 0, sinkRkey: 0 });
    }
    // Now grant the server every credit it could want: what it kept comes out.
    const before = sends;
    if (!terminated) msg({ opcode: FileOp.Read, requestId: 99_999, slot: 0, creditsGranted: 0xffff }, { op: FileOp.Read, fileId: 999, length: 1, offset: 0, sinkAddr: 0, sinkRkey: 0 });
    // The bound: four answers per receive the server holds or has posted (at most twice the
    // credits and the reserve), and a few more.
    expect(sends - before).toBeLessThanOrEqual(4 * 2 * (DEFAULT_SERVER_LIMITS.credits + 1) + 8);
    expect(terminated).toBe(true);
    expect(counters.sendQueueOverruns).toBe(1);
  });
});
