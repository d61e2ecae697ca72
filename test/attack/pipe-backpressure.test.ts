// A hostile peer that holds the token but stops reading its control pipe: every
// ResumeKeyRequest it sends (an 8-byte header) is answered with a 32-byte frame. If the server
// answers without regard to what the socket has taken, the answers pile up in the server's
// memory (four bytes kept for each byte the peer sends, without bound). The server must stop
// reading a pipe whose answers are not being read, and go on once they are.
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { PipeClient, encodePipeFrame } from '../../src/files/pipe.js';
import { FILE_PIPE_HDR, FILE_PIPE_RESUME_KEY, FilePipeType } from '../../src/wire/files-spec.js';
import { servedDir, until } from '../files/helpers.js';

const TOKEN = 'attack-pipe-token-0123456789';

/** A pipe through login and one negotiation; resolves with the socket once it is ready. */
function login(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    const c = new PipeClient({ token: TOKEN, providers: 0x03, random: (n) => new Uint8Array(randomBytes(n)) });
    const drive = (): void => {
      for (let a = c.pollAction(); a; a = c.pollAction()) {
        if (a.kind === 'write') s.write(a.bytes);
        else if (a.kind === 'error') reject(new Error(a.message));
        else {
          s.removeAllListeners('data');
          resolve(s);
        }
      }
    };
    s.on('connect', drive);
    s.on('data', (b: Buffer) => {
      c.handleReceive(new Uint8Array(b), 0);
      drive();
    });
    s.on('error', reject);
  });
}

describe('a token holder that stops reading its control pipe', () => {
  const served = servedDir('attack-pipe', { token: TOKEN, transports: ['tcp'] }, {});

  it('256k ResumeKeyRequests unread: the server buffers at most a little of the answers, stops reading, and answers all once read', async () => {
    const port = served.srv.address.port;
    // The server's side of each pipe is a socket whose local port is the server's: watch how
    // much it holds unsent after each write.
    const write = net.Socket.prototype.write;
    let most = 0;
    let serverSide: net.Socket | undefined;
    net.Socket.prototype.write = function (this: net.Socket, ...args: unknown[]) {
      const r = (write as (...a: unknown[]) => boolean).apply(this, args);
      if (this.localPort === port) {
        serverSide = this;
        most = Math.max(most, this.writableLength);
      }
      return r;
    } as typeof write;
    const s = await login(port);
    try {
      s.pause();
      let got = 0;
      const N = 256 * 1024;
      const frame = encodePipeFrame(FilePipeType.ResumeKeyRequest);
      const chunk = Buffer.alloc(8192 * frame.length);
      for (let i = 0; i < 8192; i++) chunk.set(frame, i * frame.length);
      for (let i = 0; i < N / 8192; i++) s.write(chunk);
      // Either the server read everything (and wrote every answer), or it stopped reading.
      await until(() => (s.writableLength === 0 && serverSide !== undefined && serverSide.bytesRead >= s.bytesWritten) || serverSide?.isPaused() === true,
        20_000, 'the server to read all or stop reading');
      expect(most).toBeLessThan(1 << 20);
      expect(served.srv.stats().pipeStalls).toBeGreaterThan(0);
      // Read now: every request is answered, in full, and the pipe is still there.
      const want = N * (FILE_PIPE_HDR.size + FILE_PIPE_RESUME_KEY.size);
      s.on('data', (b: Buffer) => (got += b.length));
      s.resume();
      await until(() => got >= want, 20_000, 'every answer');
      expect(got).toBe(want);
      expect(most).toBeLessThan(1 << 20);
      expect(served.srv.stats().pipes).toBe(1);
    } finally {
      net.Socket.prototype.write = write;
      s.destroy();
    }
  }, 30_000);
});
