// A metrics endpoint outlives the devices it shows: a device closed while exported leaves the
// scrape (the others and the process metrics are still served), and the server's own failures
// are SabreErrors with stable codes. Before: one closed device made every scrape HTTP 500
// ("sabre: device is closed"); a taken port threw a plain Error, a bad one Node's ERR_SOCKET_BAD_PORT.
import { get } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode, openDevice, type Device } from '../../src/index.js';
import { startMetricsServer, type MetricsServer } from '../../src/metrics/server.js';

const devs: Device[] = [];
const servers: MetricsServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  for (const d of devs.splice(0)) if (!d.closed) await d.close();
});

function scrape(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

describe('the metrics endpoint and device lifetimes', () => {
  it('a device closed while exported leaves the scrape; the live one is still served', async () => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    const b = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(a, b);
    const s = await startMetricsServer([a, b], 0);
    servers.push(s);
    expect((await scrape(s.url)).body).toMatch(/device="sabre1"/);
    await b.close();
    const r = await scrape(s.url);
    expect(r.status).toBe(200);
    expect(r.body).toMatch(/device="sabre0"/);
    expect(r.body).not.toMatch(/device="sabre1"/);
    expect(r.body).toMatch(/process_cpu/);
  });

  it('a taken port is ERR_ADDRESS_IN_USE, a port out of range ERR_INVALID_ARGUMENT', async () => {
    const a = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
    devs.push(a);
    const s = await startMetricsServer([a], 0);
    servers.push(s);
    await expect(startMetricsServer([a], s.port)).rejects.toMatchObject({ name: 'SabreError', code: ErrorCode.AddressInUse });
    for (const port of [70_000, -1, 1.5, Number.NaN]) {
      await expect(startMetricsServer([a], port), String(port)).rejects.toMatchObject({ name: 'SabreError', code: ErrorCode.InvalidArgument });
    }
  });
});
