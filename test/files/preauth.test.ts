// Before the token is proven, the file server holds little per source and nothing a stranger can
// use to lock others out: unauthenticated RDMA connections and pipes are capped per source host
// (the oldest of a source makes room for its newer ones), failed token proofs are rationed per
// source, and the tables behind this are bounded. Attackers come from other loopback addresses
// (127.0.0.2 …) than the real clients (127.0.0.1), as another host would.
import net from 'node:net';
import { describe, it } from 'vitest';
import { connect, FileClient, openDevice, type QueuePair } from '../../src/index.js';
import { FILE_SERVICE, FileStatus } from '../../src/wire/files-spec.js';
import { servedDir, until } from './helpers.js';
import { guessProof } from './raw.js';

const TOKEN = 'preauth-token-0123456789abcdef';

/** One real client round trip from 127.0.0.1: connect, read a file, end. */
async function roundTrip(port: number, transport: 'udp' | 'tcp'): Promise<string> {
  const c = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport, timeoutMs: 8000 });
  try {
    const f = await c.open('hello.txt');
    return new TextDecoder().decode(await c.read(f, 0, 100));
  } finally {
    await c.end();
  }
}

// The three servers, their attackers' source addresses and their counters are the describes' own;
// the tests within one share its server and run in order, asserting with their context's expect.
// The rationed guesses (~15 s of server-side delays, little CPU) run at once with the silent-pipe
// flood; the flood of token-less RDMA connections runs after them, on its own: with both floods
// at once in this one process a fresh-clone CI run starved a real client's round trip past 8 s.
describe.concurrent('silent pipes from another host cannot lock logins out', () => {
  const served = servedDir('preauth-pipes', { token: TOKEN, transports: ['tcp'], maxPipesPerHost: 3 });

  it.sequential('260 silent pipes from 127.0.0.3, each retaken when closed: every real round trip succeeds', async ({ expect }) => {
    let stop = false;
    let opened = 0;
    let most = 0;
    const open = new Set<net.Socket>();
    // Bounded: at most 4000 pipes in all.
    const silent = (): void => {
      if (stop || opened >= 4000) return;
      opened++;
      const s = net.connect({ host: '127.0.0.1', port: served.srv.address.port, localAddress: '127.0.0.3' });
      open.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        open.delete(s);
        most = Math.max(most, served.srv.stats().unauthenticatedPipes);
        setTimeout(silent, 50);
      });
    };
    for (let i = 0; i < 260; i++) silent();
    try {
      await until(() => opened >= 260, 20_000, '260 pipes to be opened');
      for (let i = 0; i < 6; i++) expect(await roundTrip(served.srv.address.port, 'tcp')).toBe('hello');
      const s = served.srv.stats();
      expect(s.pipesEvicted).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(8);
      expect(s.unauthenticatedPipes).toBeLessThanOrEqual(8);
    } finally {
      stop = true;
      for (const s of open) s.destroy();
    }
  }, 90_000);

  it.sequential('pipes per host are bounded, authenticated ones too: past maxPipesPerHost a new one is refused (counted)', async ({ expect }) => {
    await until(() => served.srv.stats().pipes === 0, 5000, 'the silent pipes to go');
    const cs = [];
    for (let i = 0; i < 3; i++) cs.push(await FileClient.connect(`127.0.0.1:${served.srv.address.port}`, { token: TOKEN, transport: 'tcp' }));
    const before = served.srv.stats().pipesRefused;
    await expect(FileClient.connect(`127.0.0.1:${served.srv.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 3000 })).rejects.toThrow();
    expect(served.srv.stats().pipesRefused).toBe(before + 1);
    for (const c of cs) await c.end();
  }, 30_000);
});

describe.concurrent('token guesses are rationed per source', () => {
  const served = servedDir('preauth-guess', { token: TOKEN, transports: ['tcp'], login: { maxSources: 2 } });

  it.sequential('64 wrong proofs from 127.0.0.4 over 16 pipes at a time: few are checked, none succeeds, the rest wait or are refused; a real client elsewhere logs in meanwhile', async ({ expect }) => {
    const results: (number | 'closed')[] = [];
    for (let round = 0; round < 4; round++) {
      const batch = Array.from({ length: 16 }, () => guessProof(served.srv.address.port, '127.0.0.4'));
      if (round === 1) expect(await roundTrip(served.srv.address.port, 'tcp')).toBe('hello');
      results.push(...(await Promise.all(batch)));
    }
    const s = served.srv.stats();
    expect(results).toHaveLength(64);
    expect(results.filter((r) => r === FileStatus.Success)).toHaveLength(0);
    // Unrationed, every one of the 64 would have been checked and answered AccessDenied.
    expect(s.pipeAuthFailed).toBeLessThanOrEqual(24);
    expect(results.filter((r) => r === FileStatus.AccessDenied).length).toBe(s.pipeAuthFailed);
    expect(s.loginDelayed + s.loginThrottled).toBeGreaterThan(0);
    expect(s.loginThrottled).toBeGreaterThan(0);
    expect(s.loginSources).toBe(1);
  }, 60_000);

  it.sequential('the table of sources is bounded: past login.maxSources (2), new sources share their network\'s entry (counted)', async ({ expect }) => {
    const before = served.srv.stats().loginSourcesByNetwork;
    for (const from of ['127.0.0.5', '127.0.0.6', '127.0.0.7']) expect(await guessProof(served.srv.address.port, from)).toBe(FileStatus.AccessDenied);
    const s = served.srv.stats();
    // 127.0.0.4 and 127.0.0.5 have entries; 127.0.0.6 and .7 share 127.0.0.0/24's.
    expect(s.loginSources).toBe(3);
    expect(s.loginSourcesByNetwork).toBeGreaterThan(before);
  }, 30_000);
});

describe('token-less RDMA connections from another host cannot lock logins out', () => {
  const served = servedDir('preauth-rdma', { token: TOKEN, transports: ['udp'] });

  it.sequential('70 connections from 127.0.0.2 that never authenticate, each retaken: every real round trip succeeds; the source holds at most its share', async ({ expect }) => {
    const dev = await openDevice({ transport: 'udp', host: '127.0.0.2', port: 0 });
    const at = { transport: 'udp' as const, host: '127.0.0.1', port: served.srv.devices.udp!.address.port as number };
    let stop = false;
    let made = 0;
    let most = 0;
    // The count is the server's total: sampled only while no real client is logging in, whose
    // own connection is unauthenticated for a moment too.
    let real = false;
    // Each attacker slot connects, says nothing, and takes a new connection a while later (past
    // the login deadline), at once when refused (bounded: it stops with the test, and after 400 tries).
    const attacker = async (): Promise<void> => {
      for (let round = 0; round < 400 && !stop; round++) {
        let qp: QueuePair | undefined;
        try {
          qp = await connect(dev, at, { service: FILE_SERVICE, timeoutMs: 3000, qpInit: { maxSendWr: 4, maxRecvWr: 4, maxSge: 1 } });
          made++;
        } catch {
          // refused or evicted while connecting: try again
        }
        if (!real) most = Math.max(most, served.srv.stats().unauthenticatedConnections ?? 0);
        await new Promise((r) => setTimeout(r, qp ? 2500 : 20));
        try {
          qp?.destroy();
        } catch {
          // gone with the device
        }
      }
    };
    const attackers = Array.from({ length: 70 }, () => attacker());
    try {
      await until(() => made >= 70, 20_000, 'the attacker to have made 70 connections');
      real = true;
      for (let i = 0; i < 6; i++) expect(await roundTrip(served.srv.address.port, 'udp')).toBe('hello');
      real = false;
      const s = served.srv.stats();
      expect(s.connectionsEvicted).toBeGreaterThan(0);
      // The attacker's source holds at most maxUnauthenticatedPerHost (4) unauthenticated connections.
      expect(most).toBeLessThanOrEqual(4);
      expect(s.unauthenticatedConnections).toBeLessThanOrEqual(4);
      // Once the real clients' connections are gone, the attacker's hold no registered memory.
      await until(() => served.srv.stats().registeredBytes === 0 && served.srv.stats().liveConnections > 0, 10_000, 'only unauthenticated connections, holding nothing');
    } finally {
      stop = true;
      await Promise.all(attackers);
      await dev.close();
    }
  }, 90_000);
});
