// Failed token proofs are rationed per source in a table of login.maxSources; the sources it
// could not hold shared one entry. A stranger that filled the table (maxSources + 1 addresses: one
// IPv6 /48 holds 65,536 /64s) and went on guessing from the other addresses kept that shared
// entry's turns ahead of every newcomer's, so a real client from anywhere, which had never failed,
// had its proof refused unchecked (Welcome SessionLimit) for as long as the guessing went on —
// three a second were enough. Now sources past the table are rationed with their network
// (IPv4 /24, IPv6 /48), as many networks more, and only past those together.
import type net from 'node:net';
import { describe, it } from 'vitest';
import { FileClient, serveFiles } from '../../src/index.js';
import { FileStatus } from '../../src/wire/files-spec.js';
import { tempDirsRemovedAfter } from '../files/helpers.js';
import { guessProof } from '../files/raw.js';

const TOKEN = 'login-overflow-0123456789abcdef';
const tempDir = tempDirsRemovedAfter();

describe('a stranger guessing from more addresses than login.maxSources', () => {
  it('a real client from another network still logs in while the guessing goes on; the guesses stay rationed', async ({ expect, onTestFinished }) => {
    const srv = await serveFiles(tempDir('login-overflow'), { port: 0, token: TOKEN, transports: ['tcp'], login: { maxSources: 4 } });
    onTestFinished(() => srv.close());
    const port = srv.address.port;
    // The table, full: four sources with a failure each.
    for (let i = 2; i < 6; i++) expect(await guessProof(port, `127.0.1.${i}`)).toBe(FileStatus.AccessDenied);
    // Then guesses from addresses the table cannot hold, eight at a time, until the end.
    let stop = false;
    let n = 0;
    const open = new Set<net.Socket>();
    const results: (number | 'closed')[] = [];
    const hammer = async (): Promise<void> => {
      // Bounded: 400 guesses at most.
      while (!stop && n < 400) results.push(await guessProof(port, `127.0.2.${(n++ % 200) + 1}`, open));
    };
    const guessers = Array.from({ length: 8 }, hammer);
    const halt = async (): Promise<void> => {
      stop = true;
      // Those waiting for their turn need not wait for their deadline.
      for (const s of open) s.destroy();
      await Promise.all(guessers);
    };
    onTestFinished(halt);
    await new Promise((r) => setTimeout(r, 1000));
    // Before: 'the server refused the session: …' each time (its proof refused unchecked).
    for (let i = 0; i < 3; i++) {
      const c = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 8000 });
      await c.end();
    }
    await halt();
    const st = srv.stats();
    expect(results.filter((r) => r === FileStatus.Success)).toHaveLength(0);
    // Rationed as one: the eight first at once (none had failed yet), then a checked guess per
    // doubling gap (250 ms … 2 s), the rest refused unchecked; unrationed, each of the guesses.
    expect(results.length).toBeGreaterThan(20);
    expect(st.pipeAuthFailed).toBeLessThanOrEqual(4 + 8 + 8);
    expect(st.loginThrottled).toBeGreaterThan(0);
    expect(st.loginSourcesByNetwork).toBeGreaterThan(0);
  }, 20_000);
});
