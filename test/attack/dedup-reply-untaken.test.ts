// A token holder whose dedup channel never takes the server's answers (window 1: the server may
// place one message there that the application has not taken). The server waited for each answer
// to be placed, without a deadline: a put whose client left { ok, basis } unread and then sent
// something other than its bytes had the server's Malformed refusal wait for a window credit that
// never came, so serveDedupChannel never reached its cleanup — the transfer slot (dedupTransfers,
// capped by dedupMaxTransfers: every other client's put/get --dedup refused with SessionLimit),
// the .sabre-*.part temporary and the basis were held for as long as the attacker kept its
// channel open (this test failed then: the slot was still held after 12 s and the honest put was
// refused). Checked now: a refusal is not waited for (the slot, temporary and basis go at once;
// the channel's close, with its own deadline, places it or gives up), and an answer the transfer
// goes on from is waited for at most DEDUP_REPLY_TIMEOUT_MS (counted in dedupReplyTimeouts).
import fs from 'node:fs';
import { join } from 'node:path';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { type Channel, connectChannel, type Device, FileClient, type FileServer, openDevice } from '../../src/index.js';
import { dedupAuth, FILE_DEDUP_SERVICE } from '../../src/files/dedup.js';
import { negotiate } from '../files/raw.js';
import { servedDir } from '../files/helpers.js';

const TOKEN = 'attack-dedup-reply-untaken-0123456789';
const BASE = 1 << 16;

/** Poll `cond` every 100 ms for at most `ms` (bounded); whether it came true. */
async function within(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  return cond();
}

/** An honest client's put --dedup of `byte` × BASE over base.bin: 'ok' or its error code. */
async function honestPut(srv: FileServer, dir: string, byte: string): Promise<string> {
  const c = await FileClient.connect(`127.0.0.1:${srv.address.port}`, { token: TOKEN, transport: 'udp' });
  const local = join(dir, '..', `dru-${process.pid}-${byte}.bin`);
  try {
    fs.writeFileSync(local, Buffer.alloc(BASE, byte));
    return await c.put(local, 'base.bin', { dedup: true }).then(() => 'ok', (e: { code?: string }) => e.code ?? String(e));
  } finally {
    fs.rmSync(local, { force: true });
    await c.end();
  }
}

/** A dedup put channel of a fresh session whose AUTH is sent and whose answers are never read. */
async function stalledPut(srv: FileServer, dev: Device, pipes: net.Socket[], chans: Channel[]): Promise<Channel> {
  const { neg, pipe } = await negotiate(srv.address.port, TOKEN, 'udp');
  pipes.push(pipe);
  const ch = await connectChannel(dev, { transport: 'udp', host: '127.0.0.1', port: neg.udpPort }, { service: FILE_DEDUP_SERVICE, window: 1 });
  chans.push(ch);
  await ch.send(dedupAuth(neg, 'put', 'base.bin', false));
  return ch;
}

/** `f` with a put --dedup stalled at its first answer (stalledPut) and counted as under way; its device, pipes and channels gone after. */
async function withStalledPut(srv: FileServer, f: (ch: Channel) => Promise<void>): Promise<void> {
  const dev = await openDevice({ transport: 'udp', host: '127.0.0.1', port: 0 });
  const pipes: net.Socket[] = [];
  const chans: Channel[] = [];
  try {
    const ch = await stalledPut(srv, dev, pipes, chans);
    expect(await within(() => srv.stats().dedupTransfers === 1, 5000)).toBe(true);
    await f(ch);
  } finally {
    for (const ch of chans) await ch.close().catch(() => undefined);
    for (const p of pipes) p.destroy();
    await dev.close();
  }
}

// The two cases at once, each with a server of its own (dedupMaxTransfers 1: one stalled put
// holds a server's only slot), asserting with its context's expect: most of each is deadlines.
describe.concurrent('a dedup put whose client never takes the server\'s answers', () => {
  const served = (tag: string) => servedDir(`attack-dedup-reply-untaken-${tag}`, { token: TOKEN, transports: ['udp'], dedupMaxTransfers: 1 }, { 'base.bin': 'b'.repeat(BASE) });
  const first = served('refusal');
  const second = served('bytes');

  it('the first answer left unread, then not the bytes: the refusal is not waited for, the slot, temporary and basis are freed, an honest put --dedup goes through', async ({ expect }) => {
    const { srv, dir } = first;
    await withStalledPut(srv, async (ch) => {
      await ch.send({ not: 'bytes' });
      // The refusal's cleanup does not wait for the client; the close gives up at the channel's
      // deadline (5 s). 12 s bound (the server's own deadlines: 5 s, 60 s for a put's bytes).
      expect(await within(() => srv.stats().dedupTransfers === 0, 12_000)).toBe(true);
      expect(fs.readdirSync(dir).filter((n) => n.startsWith('.sabre-'))).toEqual([]);
      expect(await honestPut(srv, dir, 'c')).toBe('ok');
      expect(fs.readFileSync(join(dir, 'base.bin')).equals(Buffer.alloc(BASE, 'c'))).toBe(true);
    });
  }, 60_000);

  it('the first answer left unread, then the bytes: the last answer is waited for within DEDUP_REPLY_TIMEOUT_MS, counted, and the slot freed', async ({ expect }) => {
    const { srv, dir } = second;
    const before = srv.stats().dedupReplyTimeouts;
    await withStalledPut(srv, async (ch) => {
      // The bytes as an ordinary message (the window is the server's, not ours): the server writes
      // them and answers { ok, bytes } into a window the unread first answer holds.
      void ch.send(new Uint8Array(BASE).fill(0x64)).catch(() => undefined);
      // 5 s for the answer, 5 s for the close's deadline; 16 s bound.
      expect(await within(() => srv.stats().dedupTransfers === 0, 16_000)).toBe(true);
      const s = srv.stats();
      expect(s.dedupReplyTimeouts).toBe(before + 1);
      expect(fs.readdirSync(dir).filter((n) => n.startsWith('.sabre-'))).toEqual([]);
      expect(await honestPut(srv, dir, 'e')).toBe('ok');
    });
  }, 60_000);
});
