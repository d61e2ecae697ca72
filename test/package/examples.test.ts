// Every program in examples/ runs as a user would run it (node examples/x.mjs, importing
// 'sabre' by name: the package's self-reference resolves it to dist/) and prints what it
// promises, so the examples never rot.
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const run = async (file: string, ...args: string[]): Promise<string> =>
  (await promisify(execFile)(process.execPath, [`examples/${file}`, ...args], { cwd: root, timeout: 60_000, encoding: 'utf8' })).stdout;

describe('examples/', () => {
  it.each(['tcp', 'udp'])('rdma-service.mjs %s: two processes, listen/accept/connect, write, read, send', async (t) => {
    const out = await run('rdma-service.mjs', t);
    expect(out).toContain('client: read back "hello, server"');
    expect(out).toContain('server: done; region holds "hello, server"');
  });

  it('raw-verbs.mjs: postSend / postRecv / poll, completions printed by name', async () => {
    const out = await run('raw-verbs.mjs', 'udp');
    expect(out).toMatch(/WorkCompletion \{ wrId: 1, status: Success, opcode: RdmaWrite, byteLen: 5/);
    expect(out).toMatch(/opcode: RecvRdmaWithImm, byteLen: 5, imm: 12648430/);
    expect(out).toContain('dst holds "hello"');
  });

  it('channel.mjs: echo of a value and of a 200 kB message', async () => {
    const out = await run('channel.mjs', 'udp');
    expect(out).toContain('reply: {"echo":{"hello":"world"}}');
    expect(out).toContain('big reply: 200000 bytes');
  });

  it('file-service.mjs: write, read back, list', async () => {
    const out = await run('file-service.mjs', 'udp');
    expect(out).toContain('read back: "written over RDMA"');
    expect(out).toContain('listing: notes.txt');
  });
});
