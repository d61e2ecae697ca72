// The admission and login-backoff policy of src/files/admission.ts, driven with a clock and no
// sockets: who is evicted, who is refused, how the gap between checked proofs grows, and that the
// source table stays bounded.
import { describe, expect, it } from 'vitest';
import { hostKey } from '../../src/core/address.js';
import { Admission, type EvictWhy, LoginBackoff, networkKey } from '../../src/files/admission.js';
import { PIPE_REFUSED, PipeClient, PipeServer, newPipeCounters, encodePipeFrame, PipeReader, pipeEvicted } from '../../src/files/pipe.js';
import { SessionTable } from '../../src/files/sessions.js';
import { FilePipeType, FileStatus, FILE_PIPE_WELCOME, type RefusalBound } from '../../src/wire/files-spec.js';
import { readFields } from '../../src/files/layout.js';
import { pollAll } from '../../src/core/sans-io.js';

describe('Admission', () => {
  it('past the per-source cap the source\'s oldest unauthenticated one is evicted; authenticated ones never are', () => {
    const a = new Admission<string>({ max: 10, maxUnauthenticated: 6, maxUnauthenticatedPerHost: 2, maxPerHost: 4 });
    expect(a.admit('a1', 'A')).toEqual({ ok: true, evict: [], why: [] });
    expect(a.admit('a2', 'A')).toEqual({ ok: true, evict: [], why: [] });
    expect(a.admit('a3', 'A')).toEqual({ ok: true, evict: ['a1'], why: ['hostPending'] });
    a.authenticated('a2');
    a.authenticated('a3');
    expect(a.admit('a4', 'A')).toEqual({ ok: true, evict: [], why: [] });
    expect(a.admit('a5', 'A')).toEqual({ ok: true, evict: [], why: [] });
    // A holds 4 (its most): a new one evicts its oldest unauthenticated (a4) …
    expect(a.admit('a6', 'A')).toEqual({ ok: true, evict: ['a4'], why: ['hostTotal'] });
    a.authenticated('a5');
    a.authenticated('a6');
    // … and with all four authenticated it is refused.
    expect(a.admit('a7', 'A')).toMatchObject({ ok: false, bound: 'hostTotal' });
    expect(a.counters).toEqual({ refused: 1, hostRefused: 1, evicted: 2 });
  });

  it('past the global cap the oldest of the source holding the most goes; when all are authenticated, refused', () => {
    const a = new Admission<string>({ max: 4, maxUnauthenticated: 3, maxUnauthenticatedPerHost: 3, maxPerHost: 10 });
    a.admit('x1', 'X');
    a.admit('x2', 'X');
    a.admit('y1', 'Y');
    expect(a.admit('z1', 'Z')).toEqual({ ok: true, evict: ['x1'], why: ['pending'] });
    for (const c of ['x2', 'y1', 'z1']) a.authenticated(c);
    expect(a.admit('w1', 'W')).toEqual({ ok: true, evict: [], why: [] });
    a.authenticated('w1');
    expect(a.admit('v1', 'V')).toMatchObject({ ok: false, bound: 'total' });
    a.remove('x2');
    expect(a.admit('v1', 'V')).toEqual({ ok: true, evict: [], why: [] });
    expect(a.size).toBe(4);
    expect(a.hosts).toBe(4);
  });

  it('sources holding as many: the oldest pending connection goes, not the first source in the table', () => {
    const a = new Admission<string>({ max: 10, maxUnauthenticated: 3, maxUnauthenticatedPerHost: 3, maxPerHost: 10 });
    a.admit('h1', 'H');
    a.authenticated('h1');
    a.admit('s1', 'S1');
    a.admit('s2', 'S2');
    a.admit('s3', 'S3');
    expect(a.admit('h2', 'H')).toEqual({ ok: true, evict: ['s1'], why: ['pending'] });
    // H's entry is the oldest in the table, its pending h2 the newest: s2 goes (h2 went before).
    expect(a.admit('s4', 'S4')).toEqual({ ok: true, evict: ['s2'], why: ['pending'] });
    expect(a.admit('s5', 'S5')).toEqual({ ok: true, evict: ['s3'], why: ['pending'] });
    expect(a.admit('s6', 'S6')).toEqual({ ok: true, evict: ['h2'], why: ['pending'] });
  });
});

describe('LoginBackoff', () => {
  it('free failures, then a doubling gap up to the maximum between checked proofs, however many pipes', () => {
    const b = new LoginBackoff({ free: 2, baseMs: 100, maxMs: 400 });
    expect([0, 1, 2, 3, 4, 5, 9].map((n) => b.gap(n))).toEqual([0, 0, 100, 200, 400, 400, 400]);
    let now = 0;
    for (let i = 0; i < 2; i++) {
      expect(b.reserve('H', now, now + 3000)).toBe(now);
      b.failed('H', now);
    }
    // Three pipes at once: their proofs are checked 100 ms apart (the failures so far set the gap).
    expect(b.reserve('H', now, now + 3000)).toBe(100);
    expect(b.reserve('H', now, now + 3000)).toBe(200);
    expect(b.reserve('H', now, 250)).toBeUndefined();
    expect(b.counters).toMatchObject({ loginDelayed: 2, loginThrottled: 1 });
    now = 200;
    b.failed('H', 100);
    b.failed('H', 200);
    // 4 failures: 400 ms after the last checked one.
    expect(b.reserve('H', now, now + 3000)).toBe(600);
    // Another source is not affected; a success forgets the source.
    expect(b.reserve('G', now, now + 3000)).toBe(now);
    b.succeeded('H');
    expect(b.reserve('H', 700, 3700)).toBe(700);
  });

  it('the table is bounded: past maxSources new sources share their network\'s entry, past as many networks one entry; failures are forgotten after memoryMs', () => {
    const b = new LoginBackoff({ free: 1, baseMs: 100, maxMs: 100, maxSources: 3, memoryMs: 1000 });
    for (let i = 0; i < 50; i++) b.failed(`10.0.0.${i}`, 0);
    // Three sources, and 10.0.0.0/24 for the 47 the table could not hold.
    expect(b.size).toBe(4);
    // Those 47 are rationed as one (their attempts counted).
    expect(b.reserve('10.0.0.40', 0, 5000)).toBe(100);
    expect(b.reserve('10.0.0.41', 0, 5000)).toBe(200);
    expect(b.counters.loginSourcesByNetwork).toBe(2);
    // A newcomer from another network is checked at once (with one shared entry it was refused
    // unchecked behind the 47's proofs).
    expect(b.reserve('10.0.1.7', 0, 5000)).toBe(0);
    expect(b.reserve('2001:db8:1:2::/64', 0, 5000)).toBe(0);
    // Networks are bounded too: past maxSources of them, one shared entry.
    for (let i = 1; i < 6; i++) b.failed(`10.0.${i}.1`, 0);
    expect(b.size).toBe(3 + 3 + 1);
    expect(b.reserve('10.0.9.9', 0, 5000)).toBe(100);
    expect(b.counters.loginSourcesOverflow).toBe(1);
    b.failed('10.0.0.1', 800);
    expect(b.reserve('10.0.0.0', 1500, 9000)).toBe(1500);
    expect(b.size).toBe(1);
    // Forgotten networks make room again: a source of 10.0.7.0/24 past the table gets its own.
    for (let i = 10; i < 13; i++) b.failed(`10.0.8.${i}`, 1500);
    expect(b.reserve('10.0.7.1', 1500, 9000)).toBe(1500);
    expect(networkKey('10.1.2.3')).toBe('10.1.2.0/24');
    expect(networkKey('2001:db8:1:2::/64')).toBe('2001:db8:1::/48');
    expect(networkKey('?')).toBeUndefined();
  });
});

describe('hostKey', () => {
  it('IPv4 as is (mapped ones too), IPv6 by /64', () => {
    expect(hostKey('10.1.2.3')).toBe('10.1.2.3');
    expect(hostKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(hostKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(hostKey('2001:db8:1:2:bbbb:1:2:3')).toBe('2001:db8:1:2::/64');
    expect(hostKey('::1')).toBe('0:0:0:0::/64');
    expect(hostKey(undefined)).toBe('?');
  });
});

describe('PipeServer with a backoff', () => {
  it('a Proof of a rationed source is held until its turn, then checked; past the deadline it is refused unchecked', () => {
    const backoff = new LoginBackoff({ free: 0, baseMs: 500, maxMs: 500 });
    backoff.failed('H', 0);
    const sessions = new SessionTable({}, (n) => new Uint8Array(n).fill(1));
    const mk = (now: number): PipeServer => new PipeServer({
      token: 't', sessions, offer: { providers: 1, udpPort: 1, tcpPort: 0, inprocId: '' }, random: (n) => new Uint8Array(n).fill(2), counters: newPipeCounters(), now, handshakeMs: 800, host: 'H', backoff,
    });
    const status = (p: PipeServer): number | undefined => {
      const r = new PipeReader();
      for (const a of pollAll(p)) if (a.kind === 'write') for (const f of r.push(a.bytes)) if (f.type === FilePipeType.Welcome) return readFields(FILE_PIPE_WELCOME, f.body, 0).status;
      return undefined;
    };
    const p = mk(100);
    p.handleReceive(encodePipeFrame(FilePipeType.Hello, new Uint8Array(32)), 100);
    pollAll(p);
    p.handleReceive(encodePipeFrame(FilePipeType.Proof, new Uint8Array(32)), 100);
    expect(p.state).toBe('held');
    expect(p.pollTimeout()).toBe(500);
    p.handleTimeout(499);
    expect(p.state).toBe('held');
    p.handleTimeout(500);
    expect(status(p)).toBe(FileStatus.AccessDenied);
    // The next turn is at 1000, after this pipe's deadline (150 + 800): refused unchecked.
    const q = mk(150);
    q.handleReceive(encodePipeFrame(FilePipeType.Hello, new Uint8Array(32)), 150);
    pollAll(q);
    q.handleReceive(encodePipeFrame(FilePipeType.Proof, new Uint8Array(32)), 150);
    expect(status(q)).toBe(FileStatus.SessionLimit);
    expect(q.state).toBe('closed');
  });
});

describe('PipeClient: a Status naming an eviction', () => {
  const client = (): PipeClient => new PipeClient({ token: 't', providers: 1, random: (n) => new Uint8Array(n).fill(3) });
  const fail = (pc: PipeClient, why: EvictWhy | RefusalBound, refused = false): string | undefined => {
    pollAll(pc);
    pc.handleReceive(refused ? PIPE_REFUSED[why as RefusalBound] : pipeEvicted(why), 0);
    const e = pollAll(pc).find((a) => a.kind === 'error');
    expect(e).toMatchObject({ status: FileStatus.SessionLimit, fatal: true });
    return e?.kind === 'error' ? e.message : undefined;
  };
  it('before the Challenge and after it (before the Welcome) the client names the bound; a refusal at accept names its own', () => {
    const bounds: [EvictWhy, string][] = [
      ['hostPending', 'too many unauthenticated control pipes from your host (maxUnauthenticatedPipesPerHost)'], ['hostTotal', 'too many control pipes from your host (maxPipesPerHost)'],
      ['pending', 'too many unauthenticated control pipes to the server (maxUnauthenticatedPipes)'], ['total', 'too many control pipes to the server (maxPipes)'],
    ];
    for (const [why, name] of bounds) {
      expect(fail(client(), why)).toBe(`the server refused: ${name}; closed before it authenticated, for a newer connection`);
      const pc = client();
      pollAll(pc);
      pc.handleReceive(encodePipeFrame(FilePipeType.Challenge, new Uint8Array(32)), 0);
      expect(pc.state).toBe('welcome');
      expect(fail(pc, why)).toBe(`the server refused: ${name}; closed before it authenticated, for a newer connection`);
    }
    // Refused at accept (every pipe of the bound authenticated): the bound, and nothing of an eviction.
    expect(fail(client(), 'hostTotal', true)).toBe('the server refused: too many control pipes from your host, all logged in (maxPipesPerHost)');
    expect(fail(client(), 'total', true)).toBe('the server refused: too many control pipes to the server, all logged in (maxPipes)');
    // An RDMA connection's code (1-4) in a pipe Status is not a pipe's eviction: the status alone.
    const pc = client();
    pollAll(pc);
    pc.handleReceive(encodePipeFrame(FilePipeType.Status, new Uint8Array([0, 0, 0, FileStatus.SessionLimit, 0, 0, 0, 1])), 0);
    expect(pollAll(pc).find((a) => a.kind === 'error')).toMatchObject({ message: expect.not.stringMatching(/newer connection/) });
  });
});
