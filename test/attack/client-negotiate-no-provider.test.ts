// A hostile file server's control pipe that holds the token (it proves it in Welcome) and then
// answers the NegotiateRequest with Success and a provider set that has none of the providers
// the client asked for (0, or udp to a tcp-only client). connect failed with
// ERR_INVALID_ARGUMENT "unknown transport undefined" (openDevice given no transport); it must be
// ERR_FILE_PROTOCOL, "the server named no provider we asked for", the pipe closed. Both cases
// failed before the fix.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeNet } from '../net-fixture.js';
import { FileClient } from '../../src/index.js';
import { encodePipeFrame, PipeReader } from '../../src/files/pipe.js';
import { pipeServerProof } from '../../src/files/auth.js';
import { writeFields } from '../../src/files/layout.js';
import { FILE_PIPE_NEGOTIATE_RESP, FILE_PIPE_RESUME_KEY, FILE_PIPE_WELCOME, FilePipeType, FileStatus } from '../../src/wire/files-spec.js';

const TOKEN = 'attack-client-negotiate-token-0123456789';
let server: Server | undefined;
const socks: Socket[] = [];
afterEach(async () => {
  await closeNet(socks, server);
  server = undefined;
});

function layout(L: Parameters<typeof writeFields>[0], v: Record<string, number | Uint8Array>): Uint8Array {
  const b = new Uint8Array(L.size);
  writeFields(L, b, 0, v);
  return b;
}

async function liar(providers: number): Promise<number> {
  server = createServer((s) => {
    socks.push(s);
    const rd = new PipeReader();
    let nc: Uint8Array = new Uint8Array(0);
    const ns = new Uint8Array(randomBytes(32));
    s.on('error', () => {});
    s.on('data', (b: Buffer) => {
      for (const f of rd.push(new Uint8Array(b))) {
        if (f.type === FilePipeType.Hello) {
          nc = f.body;
          s.write(encodePipeFrame(FilePipeType.Challenge, ns));
        } else if (f.type === FilePipeType.Proof) {
          s.write(encodePipeFrame(FilePipeType.Welcome, layout(FILE_PIPE_WELCOME, { status: FileStatus.Success, mac: pipeServerProof(TOKEN, nc, ns) })));
        } else if (f.type === FilePipeType.ResumeKeyRequest) {
          s.write(encodePipeFrame(FilePipeType.ResumeKeyResponse, layout(FILE_PIPE_RESUME_KEY, { resumeKey: new Uint8Array(randomBytes(24)) })));
        } else if (f.type === FilePipeType.NegotiateRequest) {
          s.write(encodePipeFrame(FilePipeType.NegotiateResponse, layout(FILE_PIPE_NEGOTIATE_RESP, {
            status: FileStatus.Success, providers, inprocIdLen: 0, udpPort: 9, tcpPort: 9, keyId: new Uint8Array(randomBytes(16)),
          })));
        }
      }
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return (server!.address() as AddressInfo).port;
}

describe('a NegotiateResponse whose providers are none of those asked for', () => {
  for (const [label, providers] of [['none at all (0)', 0], ['udp to a tcp-only client', 1]] as const) {
    it(`${label}: ERR_FILE_PROTOCOL, the server named no provider we asked for`, async () => {
      const port = await liar(providers);
      const e = await FileClient.connect(`127.0.0.1:${port}`, { token: TOKEN, transport: 'tcp', timeoutMs: 5000 }).then(
        (c) => (void c.end(), new Error('connected')),
        (x: Error) => x,
      );
      expect(e).toMatchObject({ name: 'FileError', code: 'ERR_FILE_PROTOCOL', message: expect.stringContaining('the server named no provider we asked for') });
      // The client hung up its pipe: the liar sees it close.
      await new Promise<void>((r) => (socks[0]!.destroyed ? r() : socks[0]!.once('close', () => r())));
    }, 20_000);
  }
});
