// Replays of the credit bugs SMB Direct and NFS/RDMA implementations shipped, first on the bare
// accounting (two Credits and a wire, with the buggy rule beside ours so the test shows what the
// rule prevents), then through the real state machines (./harness.ts checks after every step
// that nothing was granted without a posted receive behind it).
import { describe, expect, it } from 'vitest';
import { ClientConnection } from '../../src/files/client-core.js';
import { Credits, RESERVE } from '../../src/files/credits.js';
import { FileAccess, FileOp, FileStatus } from '../../src/wire/files-spec.js';
import { Harness } from './harness.js';
import { pollAll } from '../../src/core/sans-io.js';

type Rule = 'ours' | 'any-credit' | 'peer-holds-one';

/**
 * Two peers, each wanting to send `want` messages, over a FIFO wire. Every round both decide at
 * once (so last messages can cross), then the wire delivers, then receives consumed in the
 * previous round are refilled (a deferred refill, as the smb client's work item). Rules:
 * 'ours' (Credits.spend: the last credit must grant, the reserve makes that possible);
 * 'any-credit' (spend any credit, grant what is grantable: the shipped bug); 'peer-holds-one'
 * (the last credit may go ungranted while the peer holds one of ours: the rule our first draft
 * had, which crossing messages defeat).
 */
function exchange(rule: Rule, want: number, target = 2): { delivered: number; stuck: boolean } {
  const mk = (): Credits => {
    const c = new Credits(target, { send: target, grantedOut: target });
    c.posted = target + (rule === 'ours' ? RESERVE : 0);
    return c;
  };
  const peers = [mk(), mk()];
  const wires: { grant: number }[][] = [[], []];
  const refill = [0, 0];
  const left = [want, want];
  let delivered = 0;
  const plain = (c: Credits): number => Math.max(0, Math.min(c.posted - c.grantedOut, c.target - c.grantedOut));
  for (let round = 0; round < 1000; round++) {
    let moved = false;
    for (const i of [0, 1]) {
      const me = peers[i]!;
      if (left[i]! === 0) continue;
      let grant = -1;
      if (rule === 'ours') grant = me.spend();
      else if (me.send > 0 && (rule === 'any-credit' || me.send >= 2 || me.grantedOut + plain(me) >= 1)) {
        me.send--;
        grant = plain(me);
        me.grantedOut += grant;
      }
      if (grant >= 0) {
        wires[i]!.push({ grant });
        left[i]!--;
        moved = true;
      }
    }
    // Receives consumed in the previous round are refilled only now, after this round's decisions.
    for (const i of [0, 1]) {
      if (refill[i]! > 0) {
        peers[i]!.posted += refill[i]!;
        refill[i] = 0;
      }
    }
    for (const i of [0, 1]) {
      const r = peers[1 - i]!;
      for (const m of wires[i]!.splice(0)) {
        expect(r.received()).toBe(true);
        r.granted(m.grant);
        refill[1 - i]!++;
        delivered++;
        moved = true;
      }
    }
    if (!moved) break;
  }
  return { delivered, stuck: left[0]! + left[1]! > 0 };
}

describe('credits: the last-credit deadlock (MS-SMBD 3.1.5.1; smb client, 2026)', () => {
  it('on the bare accounting: the last credit goes only with a grant; the reserve makes one possible', () => {
    const c = new Credits(4, { send: 1, grantedOut: 0 });
    c.posted = 0; // every receive consumed, none refilled yet
    expect(c.canSpend()).toBe(false);
    expect(c.spend()).toBe(-1);
    c.posted = 1; // the refill
    expect(c.spend()).toBe(1);
    // The peer holds all our ordinary credits: ordinary messages grant nothing, the last one
    // grants the reserve.
    const d = new Credits(4, { send: 2, grantedOut: 4 });
    d.posted = 4 + RESERVE;
    expect(d.grantable()).toBe(0);
    expect(d.spend()).toBe(0);
    expect(d.spend()).toBe(1);
    expect(d.grantedOut).toBe(5);
    expect(d.grantedOut).toBeLessThanOrEqual(d.posted);
  });

  it('two peers whose last messages cross: "any credit" and "the peer holds one" deadlock, ours delivers everything', () => {
    expect(exchange('any-credit', 20).stuck).toBe(true);
    expect(exchange('peer-holds-one', 20).stuck).toBe(true);
    const ok = exchange('ours', 20);
    expect(ok.stuck).toBe(false);
    expect(ok.delivered).toBe(40);
  });

  it('through the state machines with one credit each way and many interrupt-mode requests, nothing deadlocks', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const data = new Uint8Array(50_000).map((_, i) => i * 7);
      const h = new Harness({ seed, files: { f: data }, limits: { credits: 2, rwDepth: 1 }, clientCredits: 2 });
      h.authenticate();
      expect(h.ready, `seed ${seed}`).toBe(true);
      const o = h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }, { interrupt: true });
      h.pump();
      const fid = h.done.get(o)!.aux;
      const ids = Array.from({ length: 12 }, (_, i) =>
        h.client.request({ op: FileOp.Read, fileId: fid, length: 1000, offset: i * 1000, sinkAddr: (1 << 20) + i * 1000, sinkRkey: 1 }, { interrupt: i % 3 !== 0 }));
      ids.push(h.client.request({ op: FileOp.Close, fileId: fid, discard: 0 }, { interrupt: true }));
      h.pump();
      expect(ids.map((id) => h.done.get(id)?.status), `seed ${seed}`).toEqual(ids.map(() => FileStatus.Success));
      expect(Buffer.from(h.mem.subarray(1 << 20, (1 << 20) + 12_000)).equals(Buffer.from(data.subarray(0, 12_000)))).toBe(true);
      expect(h.violations, `seed ${seed}`).toEqual([]);
      expect(h.rnr).toBe(0);
    }
  });
});

describe('credits: grants from stale counts (smb client credits.available, 2026)', () => {
  it('on the bare accounting: a grant taken when the message was queued over-grants; one taken when it leaves does not', () => {
    // Two answers are built while 6 receives are posted and the peer holds 2 of them; both wait
    // for a send credit.
    const stale = new Credits(8, { send: 0, grantedOut: 2 });
    stale.posted = 6;
    const snapA = stale.grantable();
    const snapB = stale.grantable(); // 3 each: both promise the same three receives
    stale.granted(2);
    // Buggy: each leaves with the grant computed when it was built.
    stale.send -= 2;
    stale.grantedOut += snapA + snapB;
    expect(stale.grantedOut).toBeGreaterThan(stale.posted); // the peer was promised receives that are not there
    // Ours: each grant is computed as its message leaves.
    const ok = new Credits(8, { send: 0, grantedOut: 2 });
    ok.posted = 6;
    ok.granted(2);
    expect(ok.spend()).toBe(3);
    expect(ok.spend()).toBe(1); // the last credit: only the reserve is left to grant
    expect(ok.grantedOut).toBeLessThanOrEqual(ok.posted);
  });

  it('through the state machines: completions queued behind zero send credits while requests keep arriving never over-grant', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const h = new Harness({ seed, files: { f: new Uint8Array(100_000) }, limits: { credits: 6, rwDepth: 2 }, clientCredits: 1 });
      h.authenticate();
      const o = h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read | FileAccess.Write, mode: 0, path: 'f' }, { interrupt: true });
      h.pump();
      const fid = h.done.get(o)!.aux;
      // The client grants the server a single credit: interrupt completions queue behind it while
      // more requests arrive and consume the server's receives.
      const ids: number[] = [];
      for (let i = 0; i < 30; i++) {
        ids.push(i % 2
          ? h.client.request({ op: FileOp.Read, fileId: fid, length: 512, offset: i * 512, sinkAddr: 1 << 20, sinkRkey: 1 }, { interrupt: true })
          : h.client.request({ op: FileOp.Write, fileId: fid, offset: i * 512, length: 512, dataOff: 0 }, { interrupt: i % 4 === 0, data: new Uint8Array(512).fill(i) }));
        if (i % 5 === 0) for (let k = 0; k < 3; k++) h.step();
      }
      h.pump();
      expect(h.violations, `seed ${seed}`).toEqual([]);
      expect(ids.every((id) => h.done.get(id)?.status === FileStatus.Success), `seed ${seed}`).toBe(true);
    }
  });
});

describe('credits belong to one connection instance (xprtrdma "credit window reset")', () => {
  it('a reconnect starts from a new ClientConnection: one message before the new grant, never the old count', () => {
    const h = new Harness({ files: { f: new Uint8Array(10) }, limits: { credits: 16 } });
    h.authenticate();
    expect(h.client.credits.send).toBeGreaterThan(4);
    const old = h.client;
    // The connection is lost; a new one (new QPs, new server state) comes up.
    old.fail('ERR_FILE_CONNECTION_LOST', 'lost');
    h.newConnection(4);
    expect(h.client).not.toBe(old);
    expect(h.client.credits.send).toBe(1);
    // Requests issued before the new authentication wait: nothing but the AuthenticateRequest leaves.
    const early = [1, 2, 3].map(() => h.client.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }, { interrupt: true }));
    h.authenticate();
    expect(h.counters.beforeAuth).toBe(0);
    expect(h.counters.creditOverruns).toBe(0);
    expect(early.map((id) => h.done.get(id)?.status)).toEqual([0, 0, 0]);
    expect(h.violations).toEqual([]);
  });

  it('a client that keeps the old connection\'s credits overruns the new server connection, which terminates it (counted)', () => {
    const h = new Harness({ limits: { credits: 16 } });
    h.authenticate();
    const stale = h.client;
    expect(stale.credits.send).toBeGreaterThan(2);
    // The buggy reconnect: the same client state (its 16 credits) on a new server connection.
    h.newConnection(4, stale);
    const msgs = [1, 2, 3].map(() => stale.request({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }, { interrupt: true }));
    h.pump();
    expect(msgs.length).toBe(3);
    expect(h.terminated).toBeDefined();
    expect(h.counters.beforeAuth + h.counters.creditOverruns).toBeGreaterThan(0);
  });
});

describe('delta credits: −N makes the client retire N credits, each answered by a StatusResponse', () => {
  it('lowering the target from 16 to 4 reclaims the receives, and the connection goes on', () => {
    const h = new Harness({ files: { f: new Uint8Array(8192) }, limits: { credits: 16 }, clientCredits: 8 });
    h.authenticate();
    expect(h.client.credits.send).toBe(16);
    h.server.setCreditTarget(4);
    // The DeltaCredit(−12) is among the server's actions; pump it through.
    h.pump();
    expect(h.client.counters.retired).toBe(12);
    expect(h.client.counters.retireAcks).toBe(12);
    expect(h.counters.creditsRetired).toBe(12);
    expect(h.client.credits.send).toBeLessThanOrEqual(4);
    expect(h.serverRq.length).toBeLessThanOrEqual(4 + RESERVE);
    // Work continues within the smaller window.
    const fid = h.run({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }).aux;
    for (let i = 0; i < 10; i++) expect(h.run({ op: FileOp.Read, fileId: fid, length: 100, offset: 0, sinkAddr: 1 << 20, sinkRkey: 1 }).status).toBe(0);
    expect(h.violations).toEqual([]);
    // And back up: +N grants more.
    h.server.setCreditTarget(10);
    h.pump();
    expect(h.client.credits.send).toBeGreaterThan(4);
    expect(h.violations).toEqual([]);
  });
});

describe('a malformed message still gets its receive reposted', () => {
  it('3× the credits of garbage (each paid with a credit) and the connection still works; the server grants back unasked', () => {
    const h = new Harness({ files: { f: new Uint8Array(100) }, limits: { credits: 4 }, clientCredits: 4 });
    h.authenticate();
    for (let i = 0; i < 12; i++) {
      // A buggy client: well-credited but unparseable (too short, unknown opcode, bad body).
      while (h.client.credits.send === 0) if (!h.step()) break;
      expect(h.client.credits.send).toBeGreaterThan(0);
      h.client.credits.send--;
      const junk = i % 3 === 0 ? new Uint8Array([1, 2, 3]) : i % 3 === 1 ? new Uint8Array(16).fill(0xee) : new Uint8Array(20);
      h.injectC2S(junk);
      h.pump();
    }
    expect(h.counters.malformed).toBe(12);
    expect(h.terminated).toBeUndefined();
    expect(h.serverRq.length).toBe(4 + RESERVE);
    expect(h.run({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'f' }).status).toBe(0);
    expect(h.counters.grantOnly).toBeGreaterThan(0);
  });
});

describe('random mixes through both state machines', () => {
  it('every request completes, byte-exact, with no over-grant, for 40 seeds', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const size = 200_000;
      const src = new Uint8Array(size).map((_, i) => (i * 31 + seed) & 0xff);
      const credits = 2 + (seed % 5);
      const h = new Harness({ seed, files: { src }, limits: { credits, rwDepth: 1 + (seed % 3), maxWriteSize: 8192, maxReadWriteSize: 16384 }, clientCredits: 1 + (seed % 4), statusSlots: 8 });
      h.authenticate();
      expect(h.ready, `seed ${seed}`).toBe(true);
      const rid = h.run({ op: FileOp.RegisterFile, access: FileAccess.Read, mode: 0, path: 'src' }).aux;
      const wid = h.run({ op: FileOp.RegisterFile, access: FileAccess.Write | FileAccess.Create | FileAccess.Replace, mode: 0o644, path: 'dst' }).aux;
      const reads: number[] = [];
      for (let off = 0; off < size; off += 16384) {
        const len = Math.min(16384, size - off);
        reads.push(h.client.request({ op: FileOp.Read, fileId: rid, length: len, offset: off, sinkAddr: (1 << 20) + off, sinkRkey: 1 }, { interrupt: ((seed + off) & 1) === 0 }));
        if ((off / 16384) % 3 === 0) h.step();
      }
      h.pump();
      expect(reads.every((id) => h.done.get(id)?.status === 0), `seed ${seed}: ${JSON.stringify(h.failed)}`).toBe(true);
      const got = h.mem.slice(1 << 20, (1 << 20) + size);
      expect(Buffer.from(got).equals(Buffer.from(src)), `seed ${seed}`).toBe(true);
      const writes: number[] = [];
      for (let off = 0; off < size; off += 8192) {
        const len = Math.min(8192, size - off);
        writes.push(h.client.request({ op: FileOp.Write, fileId: wid, offset: off, length: len, dataOff: 0 }, { interrupt: (off & 8192) === 0, data: got.subarray(off, off + len) }));
        if (off % 3 === 0) h.step();
      }
      writes.push(h.client.request({ op: FileOp.Close, fileId: wid, discard: 0 }, { interrupt: true }));
      h.pump();
      expect(writes.every((id) => h.done.get(id)?.status === 0), `seed ${seed}`).toBe(true);
      expect(Buffer.from(h.files.get('dst')!).equals(Buffer.from(src)), `seed ${seed}`).toBe(true);
      expect(h.violations, `seed ${seed}`).toEqual([]);
      expect(h.rnr, `seed ${seed}`).toBe(0);
    }
  });
});

describe('ClientConnection alone', () => {
  it('may send exactly one message before its first grant', () => {
    const c = new ClientConnection({ credits: 4, statusSlots: 4, receiveSize: 128 });
    c.start({ resumeKey: new Uint8Array(24), keyId: new Uint8Array(16), kAuth: new Uint8Array(32), nonce: new Uint8Array(16), statusAddr: 0, statusRkey: 1 });
    expect(pollAll(c).filter((a) => a.kind === 'send')).toHaveLength(1);
    expect(c.credits.send).toBe(0);
  });
});
