// Authenticated RDMA connections per source host (ServeOptions.maxConnectionsPerHost). Only
// unauthenticated ones were capped per host; a token holder on one host could bind up to
// maxConnectionsPerSession (4) connections to each of its sessions and fill maxConnections (64),
// after which every other host's client was refused. Now a host holds at most
// maxConnectionsPerHost connections: past it a new one is refused and counted
// (connectionHostLimit), never one of its authenticated ones closed (an honest client holds its
// connection, busy or idle), and another host still gets in. Real pipes and udp RDMA connections
// on 127.0.0.1, the token holder's connections from 127.0.0.2 (udp: the tcp device's outgoing
// connections do not bind the device's host, so they all come from 127.0.0.1).
import { describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { Admission } from '../../src/files/admission.js';
import { FileOp } from '../../src/wire/files-spec.js';
import { servedDir, until } from './helpers.js';
import { negotiate, Raw } from './raw.js';

const TOKEN = 'connection-bounds-token-0123456789';
// Small connections: each bound one registers its credits' receives and staging at the server.
const LIMITS = { credits: 2, maxWriteSize: 64 << 10, maxReadWriteSize: 64 << 10, rwDepth: 1 };

/** A new session (pipe from 127.0.0.1) and one RDMA connection for it from `from`; whether it authenticated. */
async function bound(port: number, from: string): Promise<{ raw: Raw | undefined; ok: boolean }> {
  const { neg, pipe } = await negotiate(port, TOKEN, 'udp');
  let raw: Raw;
  try {
    raw = await Raw.onto(neg, pipe, port, 'udp', 8, from);
  } catch {
    // Refused while connecting (torn down before cm finished): as good as no answer.
    pipe.destroy();
    return { raw: undefined, ok: false };
  }
  raw.authenticate();
  const ok = await raw.until((g) => g.some((x) => x.hdr.opcode === FileOp.StatusResponse && (x.hdr.flags & 0x80) === 0), 3000);
  return { raw, ok };
}

describe('Admission.enter (no I/O): an already authenticated connection is held to its source\'s cap', () => {
  it('refused (counted as a host refusal) when its source holds maxPerHost authenticated ones; an unauthenticated one of the source makes room', () => {
    const a = new Admission<string>({ max: 10, maxUnauthenticated: 6, maxUnauthenticatedPerHost: 2, maxPerHost: 2 });
    expect(a.enter('a1', 'A')).toEqual({ ok: true, evict: [], why: [] });
    expect(a.admit('a2', 'A')).toEqual({ ok: true, evict: [], why: [] });
    // A holds 2: an authenticated newcomer takes the unauthenticated one's place …
    expect(a.enter('a3', 'A')).toEqual({ ok: true, evict: ['a2'], why: ['hostTotal'] });
    // … and with both authenticated it is refused, as admit is.
    expect(a.enter('a4', 'A')).toMatchObject({ ok: false });
    expect(a.admit('a5', 'A')).toMatchObject({ ok: false });
    expect(a.counters).toEqual({ refused: 2, hostRefused: 2, evicted: 1 });
    expect(a.enter('b1', 'B')).toEqual({ ok: true, evict: [], why: [] });
    expect(a.unauthenticated).toBe(0);
    expect(a.hosts).toBe(2);
  });
});

describe('authenticated RDMA connections of one source host (real sockets)', () => {
  const s = servedDir('conn-host', { port: 0, token: TOKEN, transports: ['udp'], limits: LIMITS, maxConnectionsPerHost: 3 });

  it('127.0.0.2 binds maxConnectionsPerHost (3), the 4th is refused and counted; a client from 127.0.0.1 still connects; one gone, the host gets one back', async () => {
    const port = s.srv.address.port;
    const held: Raw[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const b = await bound(port, '127.0.0.2');
        if (b.raw) held.push(b.raw);
        expect(b.ok).toBe(true);
      }
      const over = await bound(port, '127.0.0.2');
      if (over.raw) held.push(over.raw);
      expect(over.ok).toBe(false);
      await until(() => s.srv.stats().liveConnections === 3, 5000, 'the refused connection to be gone');
      expect(s.srv.stats()).toMatchObject({ connectionHostLimit: 1, connectionHosts: 1 });
      expect(s.srv.stats().connectionsRefused).toBeGreaterThanOrEqual(1);
      // The held ones were not closed for it.
      for (const r of held.slice(0, 3)) expect(r.terminal()).toBeUndefined();

      const c = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'udp', timeoutMs: 10_000 });
      try {
        expect(new TextDecoder().decode(await c.read(await c.open('hello.txt'), 0, 5))).toBe('hello');
        expect(s.srv.stats().connectionHosts).toBe(2);
      } finally {
        await c.end();
      }

      // Its pipe closed, the first session's connection goes with it: room for one more.
      await held.shift()!.close();
      await until(() => s.srv.stats().liveConnections === 2, 5000, 'the closed session\'s connection to be torn down');
      const again = await bound(port, '127.0.0.2');
      if (again.raw) held.push(again.raw);
      expect(again.ok).toBe(true);
      expect(s.srv.stats().connectionHostLimit).toBe(1);
    } finally {
      for (const r of held) await r.close().catch(() => {});
    }
  }, 60_000);
});
