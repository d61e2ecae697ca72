// connect() to a device where nothing listens fails at once with ERR_UNREACHABLE on every
// transport (docs/errors.md: one code per cause, known as soon as it is known): tcp refuses in
// its MPA exchange; udp and inproc devices answer a Send to their CM QPN, which a device that
// never listened does not have, with an immediate Terminate (the engine's answer for a QPN
// that does not exist). A channel's connect says the same: the flush its refused connect caused
// in the channel is not the cause (it said ERR_CLOSED "receive failed: WrFlushErr" before).
import { afterEach, describe, expect, it } from 'vitest';
import { connect, connectChannel, ErrorCode, openDevice, type Device } from '../../src/index.js';

const devs: Device[] = [];
afterEach(async () => {
  for (const d of devs.splice(0)) await d.close();
});

async function dev(transport: 'udp' | 'tcp' | 'inproc'): Promise<Device> {
  const d = await openDevice(transport === 'inproc' ? { transport } : { transport, host: '127.0.0.1', port: 0 });
  devs.push(d);
  return d;
}

describe.each(['udp', 'tcp', 'inproc'] as const)('connect to a device with no listener over %s', (transport) => {
  it('rejects with ERR_UNREACHABLE at once', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    const t0 = performance.now();
    const err = await connect(a, b.address, { service: 5 }).then(() => undefined, (e: { code?: string }) => e);
    expect(err?.code).toBe(ErrorCode.Unreachable);
    expect(performance.now() - t0).toBeLessThan(2000);
    // And again (the first answer did not use up anything).
    const again = await connect(a, b.address, { service: 5 }).then(() => undefined, (e: { code?: string }) => e);
    expect(again?.code).toBe(ErrorCode.Unreachable);
  });

  it('connectChannel rejects with ERR_UNREACHABLE at once, to another device and to its own', async () => {
    const a = await dev(transport);
    const b = await dev(transport);
    for (const to of [b, a]) {
      const t0 = performance.now();
      const err = await connectChannel(a, to.address, { service: 5, connectTimeoutMs: 5000 }).then(() => undefined, (e: { code?: string; message?: string }) => e);
      expect(err?.code, err?.message).toBe(ErrorCode.Unreachable);
      expect(performance.now() - t0).toBeLessThan(2000);
    }
  });
});
