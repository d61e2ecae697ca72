// The tcp variant of a stalled connect: an MPA Request for the file service (a sabre block with
// its service number) that asks for peer-to-peer mode, so the listener must wait for the
// initiator's zero-length RDMA Write RTR before the connection is up — and the RTR never comes.
// Each such request holds a slot of the cm listener's backlog until the handshake deadline; from
// one source they must not keep a real client from another out.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { FileClient } from '../../src/index.js';
import { encodeSabrePd } from '../../src/transport/tcp/private-data.js';
import { FILE_SERVICE } from '../../src/wire/files-spec.js';
import { cat } from '../transport/tcp/raw-mpa.js';
import { servedDir } from '../files/helpers.js';

const TOKEN = 'attack-rtr-token-0123456789';

/** An MPA Request (CRC, enhanced) with IRD/ORD 16, peer-to-peer with a zero-length Write RTR, and a sabre connect block for `service`. */
function stalledRequest(service: number, qpn: number): Uint8Array {
  const block = encodeSabrePd({ kind: 'connect', initiatorQpn: qpn, responderQpn: 0, nonce: qpn * 7919, service });
  const pd = cat(Uint8Array.of(0x80, 0x10, 0x80, 0x10), block);
  return cat(new TextEncoder().encode('MPA ID Req Frame'), Uint8Array.of(0x50, 0x02, pd.length >> 8, pd.length & 0xff), pd);
}

describe('MPA Requests whose RTR never comes (tcp cm)', () => {
  const served = servedDir('attack-rtr', { token: TOKEN, transports: ['tcp'] });

  it('24 stalled MPA Requests from 127.0.0.2, 24 more every 250 ms: a real client from 127.0.0.1 still logs in and reads', async () => {
    const port = served.srv.devices.tcp!.address.port as number;
    const socks: net.Socket[] = [];
    let stop = false;
    let qpn = 100;
    // Bounded: 40 rounds of 24.
    const storm = async (): Promise<void> => {
      for (let round = 0; round < 40 && !stop; round++) {
        for (let i = 0; i < 24; i++) {
          const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
          s.on('error', () => {});
          s.on('connect', () => s.write(stalledRequest(FILE_SERVICE, qpn++)));
          socks.push(s);
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    const attack = storm();
    try {
      await new Promise((r) => setTimeout(r, 1500));
      for (let i = 0; i < 3; i++) {
        const c = await FileClient.connect(`127.0.0.1:${served.srv.address.port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 4000 });
        try {
          const f = await c.open('hello.txt');
          expect(new TextDecoder().decode(await c.read(f, 0, 100))).toBe('hello');
        } finally {
          await c.end();
        }
      }
      // The stalled requests were closed for the real client's (counted).
      expect(served.srv.stats().halfOpenEvicted).toBeGreaterThan(0);
    } finally {
      stop = true;
      await attack;
      for (const s of socks) s.destroy();
    }
  }, 60_000);
});
