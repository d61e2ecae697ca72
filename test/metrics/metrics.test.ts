// Prometheus metrics over a real HTTP endpoint: two devices moving real data, scraped, and the
// counters checked against what was moved; a registered stats source (the hook for channels);
// and `sabre perf --metrics-port` scraped while a run is under way.
import { get } from 'node:http';
import diagnostics_channel from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/dataplane/device-memory.js';
import { Access, connectChannel, listenChannels, Opcode, openDevice, type Device } from '../../src/index.js';
import { UdpLink } from '../../src/transport/udp/link.js';
import { Device as DeviceClass } from '../../src/verbs/device.js';
import { DIAGNOSTIC_CHANNELS, publish } from '../../src/metrics/diagnostics.js';
import { SabreMetrics } from '../../src/metrics/registry.js';
import { startMetricsServer, type MetricsServer } from '../../src/metrics/server.js';
import { freePort, sabreBg } from '../cli/helpers.js';
import { pair, take } from '../verbs/helpers.js';

function fetchText(url: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    }).on('error', reject);
  });
}

/** The value of one sample line `name{labels…} value` whose labels include all of `want`. */
function sample(body: string, name: string, want: Record<string, string> = {}): number | undefined {
  for (const line of body.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    const m = /^([^{ ]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) return Number(m[3]);
  }
  return undefined;
}

let devs: Device[] = [];
let server: MetricsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
  for (const d of devs) await d.close();
  devs = [];
});

describe.each(['udp', 'tcp'] as const)('metrics of %s devices', (transport) => {
  it('a scrape shows the devices, their QPs, CQ, placements and link counters', async () => {
    const [sa, sb] = await pair({ device: { transport }, depth: 64 });
    const { dev: a, pd: pa, cq: ca, qp: qa } = sa;
    const { dev: b, pd: pb } = sb;
    devs = [a, b];
    const ma = pa.regMr(1 << 16, Access.LocalWrite);
    const mb = pb.regMr(1 << 16, Access.LocalWrite | Access.RemoteWrite);
    const m = new SabreMetrics();
    m.addDevice(a, 'a');
    m.addDevice(b, 'b');
    m.addPd(pa);
    m.addPd(pb);
    m.addCq(a, ca, 'a-cq');
    server = await startMetricsServer(m, 0);
    const N = 8;
    for (let i = 0; i < N; i++) qa.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: ma.addr, length: 4096, lkey: ma.lkey }], remoteAddr: mb.addr, rkey: mb.rkey });
    m.countCompletions(a, await take(ca, N));
    const r = await fetchText(server.url);
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const placed = (sample(r.body, 'sabre_placed_bytes_total', { device: 'b', path: 'direct' }) ?? 0) + (sample(r.body, 'sabre_placed_bytes_total', { device: 'b', path: 'indirect' }) ?? 0);
    expect(placed).toBeGreaterThanOrEqual(N * 4096);
    expect(sample(r.body, 'sabre_qp_state', { device: 'a', qpn: String(qa.qpn), type: 'rc', state: 'Rts' })).toBe(3);
    expect(sample(r.body, 'sabre_qps', { device: 'b', type: 'rc' })).toBe(1);
    expect(sample(r.body, 'sabre_memory_regions', { device: 'a' })).toBe(1);
    expect(sample(r.body, 'sabre_cq_depth', { device: 'a', cq: 'a-cq' })).toBe(64);
    expect(sample(r.body, 'sabre_completions_total', { device: 'a', opcode: 'RdmaWrite', status: 'Success' })).toBe(N);
    expect(sample(r.body, 'sabre_completion_bytes_count', { device: 'a', opcode: 'RdmaWrite' })).toBe(N);
    expect(sample(r.body, 'sabre_device_memory_bytes', { device: 'a', state: 'capacity' })).toBeGreaterThan(0);
    if (transport === 'udp') {
      // Each write is at least one engine frame; the writes may share datagrams (they are not
      // held one per round trip), so the datagrams are counted as some, not as one per write.
      expect(sample(r.body, 'sabre_link_frames_total', { device: 'a', direction: 'tx' })).toBeGreaterThanOrEqual(N);
      expect(sample(r.body, 'sabre_link_datagrams_total', { device: 'a', direction: 'tx' })).toBeGreaterThan(0);
      expect(sample(r.body, 'sabre_crc_failures_total', { device: 'b', stage: 'inline' })).toBe(0);
      expect(sample(r.body, 'sabre_transport_contexts', { device: 'a' })).toBe(1);
    } else {
      expect(sample(r.body, 'sabre_link_segments_total', { device: 'a', direction: 'tx' })).toBeGreaterThanOrEqual(N);
    }
    // Counters move between scrapes: the next scrape reads live values.
    qa.postSend({ wrId: 99, opcode: Opcode.RdmaWrite, sgList: [{ addr: ma.addr, length: 4096, lkey: ma.lkey }], remoteAddr: mb.addr, rkey: mb.rkey });
    await ca.wait(5000);
    const again = await fetchText(server.url);
    const placed2 = (sample(again.body, 'sabre_placed_bytes_total', { device: 'b', path: 'direct' }) ?? 0) + (sample(again.body, 'sabre_placed_bytes_total', { device: 'b', path: 'indirect' }) ?? 0);
    expect(placed2).toBe(placed + 4096);
    expect((await fetchText(server.url.replace('/metrics', '/nope'))).status).toBe(404);
  });
});

describe('udp transport contexts', () => {
  it('after a lossy transfer: retransmissions, RTT and window per peer in dev.stats().linkContexts and the scrape', async () => {
    // The receiver drops one large datagram in 8 before its endpoint sees it (a lossy path).
    let seen = 0;
    let dropped = 0;
    const mk = async (filter?: (d: Uint8Array) => boolean): Promise<Device> => {
      const mem = await DeviceMemory.create({ maximumBytes: 256 << 20, workerSlots: 0 });
      const t = await UdpLink.open({ host: '127.0.0.1', port: 0, mtu: 9000, ...(filter ? { rxFilter: filter } : {}) });
      const d = new DeviceClass(mem, t, { mss: t.mss });
      devs.push(d);
      return d;
    };
    const a = await mk();
    const b = await mk((d) => {
      if (d.length > 1000 && ++seen % 8 === 0) {
        dropped++;
        return false;
      }
      return true;
    });
    const side = (d: Device) => {
      const pd = d.allocPd();
      const cq = d.createCq({ depth: 64 });
      return { pd, cq, qp: pd.createQp({ type: 'rc', sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16, maxSge: 1 }) };
    };
    const sa = side(a);
    const sb = side(b);
    await Promise.all([sa.qp.connect({ address: b.address, qpn: sb.qp.qpn }), sb.qp.connect({ address: a.address, qpn: sa.qp.qpn })]);
    const ma = sa.pd.regMr(1 << 20, Access.LocalWrite);
    const mb = sb.pd.regMr(1 << 20, Access.LocalWrite | Access.RemoteWrite);
    const N = 8;
    for (let i = 0; i < N; i++) sa.qp.postSend({ wrId: i, opcode: Opcode.RdmaWrite, sgList: [{ addr: ma.addr, length: 1 << 20, lkey: ma.lkey }], remoteAddr: mb.addr, rkey: mb.rkey });
    const wcs = await take(sa.cq, N, 20_000);
    expect(wcs.every((w) => w.status === 0)).toBe(true);
    expect(dropped).toBeGreaterThan(0);
    // The completions ride on b's engine acks; the transport ACKs of a's last datagrams may
    // still be on their way: wait (bounded) until nothing is in flight.
    for (let i = 0; i < 200 && a.stats().linkContexts![0]!.inFlight > 0; i++) await new Promise((r) => setTimeout(r, 10));

    const rows = a.stats().linkContexts!;
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    const peer = `${(b.address as unknown as { host: string }).host}:${(b.address as unknown as { port: number }).port}`;
    expect(row.peer).toBe(peer);
    // Every dropped datagram was sent again at least once (the drops hit a's DATA and b's nothing else).
    expect(row.retransmits).toBeGreaterThanOrEqual(dropped);
    expect(row.txData).toBeGreaterThanOrEqual(N * 100); // 8 MiB in datagrams of < 9000 bytes
    expect(row.srttUs).toBeGreaterThan(0);
    expect(row.rtoUs).toBeGreaterThanOrEqual(row.srttUs);
    expect(row.cwnd).toBeGreaterThan(0);
    expect(row.inFlight).toBe(0); // everything was acknowledged
    expect(a.stats().link!.retransmits).toBe(row.retransmits);

    const m = new SabreMetrics({ defaultMetrics: false });
    m.addDevice(a, 'a');
    m.addDevice(b, 'b');
    server = await startMetricsServer(m, 0);
    const body = (await fetchText(server.url)).body;
    expect(body).toMatch(/# TYPE sabre_context_retransmits_total counter/);
    expect(body).toMatch(/# TYPE sabre_context_srtt_seconds gauge/);
    expect(sample(body, 'sabre_context_retransmits_total', { device: 'a', transport: 'udp', peer })).toBe(row.retransmits);
    expect(sample(body, 'sabre_retransmits_total', { device: 'a' })).toBe(row.retransmits);
    expect(sample(body, 'sabre_context_srtt_seconds', { device: 'a', peer })).toBeGreaterThan(0);
    expect(sample(body, 'sabre_context_cwnd_datagrams', { device: 'a', peer })).toBe(row.cwnd);
    expect(sample(body, 'sabre_context_in_flight_datagrams', { device: 'a', peer })).toBe(0);
    expect(sample(body, 'sabre_context_data_datagrams_total', { device: 'a', peer, direction: 'tx' })).toBe(row.txData);
    // The receiver's side of the same pair: what it received, under a's address.
    const bPeer = `${(a.address as unknown as { host: string }).host}:${(a.address as unknown as { port: number }).port}`;
    expect(sample(body, 'sabre_context_data_datagrams_total', { device: 'b', peer: bPeer, direction: 'rx' })).toBeGreaterThanOrEqual(N * 100);
  }, 30_000);
});

describe('registration hook and diagnostics', () => {
  it('a stats source (as a channel registers) appears, nested keys flattened, and goes when unregistered', async () => {
    const m = new SabreMetrics({ defaultMetrics: false });
    let sent = 5;
    const off = m.addSource('channel', 'svc9-peer1', () => ({ messagesSent: sent, credits: { granted: 3 }, open: true, name: 'x' }));
    server = await startMetricsServer(m, 0);
    let body = (await fetchText(server.url)).body;
    expect(sample(body, 'sabre_channel_stat', { instance: 'svc9-peer1', stat: 'messagesSent' })).toBe(5);
    expect(sample(body, 'sabre_channel_stat', { instance: 'svc9-peer1', stat: 'credits_granted' })).toBe(3);
    expect(sample(body, 'sabre_channel_stat', { instance: 'svc9-peer1', stat: 'open' })).toBe(1);
    sent = 7;
    body = (await fetchText(server.url)).body;
    expect(sample(body, 'sabre_channel_stat', { stat: 'messagesSent' })).toBe(7);
    off();
    body = (await fetchText(server.url)).body;
    expect(sample(body, 'sabre_channel_stat', { stat: 'messagesSent' })).toBeUndefined();
    expect(() => m.addSource('Bad-Kind', 'x', () => ({}))).toThrow(/snake_case/);
  });

  it('channels: their device totals are in dev.stats().channels and the scrape; one channel by addSource(ch.stats)', async () => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(a, b);
    const l = listenChannels(b, { service: 9 });
    const [c, s] = await Promise.all([connectChannel(a, b.address, { service: 9 }), l.accept(10_000)]);
    const got: unknown[] = [];
    const reading = (async () => {
      for await (const msg of s) if (got.push(msg) === 5) break;
    })();
    for (let i = 0; i < 5; i++) await c.send({ i, pad: 'x'.repeat(i * 3000) });
    await reading;
    const m = new SabreMetrics({ defaultMetrics: false });
    m.addDevice(a, 'client');
    m.addSource('channel', 'client-svc9', () => ({ ...c.stats() }));
    server = await startMetricsServer(m, 0);
    const body = (await fetchText(server.url)).body;
    expect((a.stats() as unknown as { channels: { channels: number; messagesSent: number } }).channels).toMatchObject({ channels: 1, messagesSent: 5 });
    expect(sample(body, 'sabre_device_stat', { device: 'client', stat: 'channels_channels' })).toBe(1);
    expect(sample(body, 'sabre_device_stat', { device: 'client', stat: 'channels_messagesSent' })).toBe(5);
    expect(sample(body, 'sabre_channel_stat', { instance: 'client-svc9', stat: 'messagesSent' })).toBe(5);
    await c.close();
    await s.close();
    l.close();
  });

  it('diagnostics are free when nobody listens and structured when someone does', () => {
    let built = 0;
    publish('sabre:perf:result', () => ((built++), { x: 1 }));
    expect(built).toBe(0);
    const got: unknown[] = [];
    const fn = (m: unknown) => got.push(m);
    diagnostics_channel.subscribe('sabre:perf:result', fn);
    try {
      publish('sabre:perf:result', () => ((built++), { bytes: 64 }));
    } finally {
      diagnostics_channel.unsubscribe('sabre:perf:result', fn);
    }
    expect(built).toBe(1);
    expect(got).toEqual([expect.objectContaining({ channel: 'sabre:perf:result', bytes: 64, time: expect.any(String) })]);
    expect(Object.keys(DIAGNOSTIC_CHANNELS).every((n) => n.startsWith('sabre:'))).toBe(true);
  });
});

describe('sabre perf --metrics-port', () => {
  it('serves /metrics while the run is under way', async () => {
    const port = await freePort();
    const run = sabreBg(['perf', 'write_bw', '--transport', 'udp', '-s', '4096', '-D', '4', '--metrics-port', String(port)]);
    try {
      await run.waitFor(/Metrics\s+: http:\/\/127\.0\.0\.1:\d+\/metrics/);
      let body = '';
      for (let i = 0; i < 40; i++) {
        await new Promise((r) => setTimeout(r, 250));
        body = (await fetchText(`http://127.0.0.1:${port}/metrics`)).body;
        if ((sample(body, 'sabre_completions_total', { device: 'perf-client', opcode: 'RdmaWrite', status: 'Success' }) ?? 0) > 0) break;
      }
      expect(sample(body, 'sabre_completions_total', { device: 'perf-client', opcode: 'RdmaWrite', status: 'Success' })).toBeGreaterThan(0);
      expect(sample(body, 'sabre_qp_state', { device: 'perf-client', state: 'Rts' })).toBe(3);
      expect(sample(body, 'sabre_link_datagrams_total', { device: 'perf-client', direction: 'tx' })).toBeGreaterThan(0);
      expect(body).toContain('process_cpu_seconds_total');
      expect(await run.exited).toBe(0);
    } finally {
      run.child.kill('SIGKILL');
    }
  }, 30_000);
});
