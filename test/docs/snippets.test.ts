// The README's and docs/' code blocks run as written. Every ```ts / ```js block is a program: it
// is transpiled (type syntax stripped, nothing checked), its 'sabre' imports pointed at this
// build, and run in a child process that must exit 0 within the deadline. A block that shows
// the shape of an API rather than a program (signatures with `'udp' | 'tcp'`, `…` holes) is
// fenced ```ts fragment and listed, not run: the fence says what it is.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = process.cwd();
const FILES = ['README.md', ...fs.readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];

interface Block {
  file: string;
  line: number;
  info: string;
  code: string;
}

function blocks(file: string): Block[] {
  const out: Block[] = [];
  const lines = fs.readFileSync(join(ROOT, file), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^```(\S*)(.*)$/.exec(lines[i]!);
    if (!m) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
    out.push({ file, line: start + 1, info: `${m[1]}${m[2]}`.trim(), code: body.join('\n') });
  }
  return out;
}

const all = FILES.flatMap(blocks).filter((b) => /^(ts|js|mjs)\b/.test(b.info));
const programs = all.filter((b) => !/\bfragment\b/.test(b.info));

const dist = (sub: string): string => pathToFileURL(join(ROOT, 'dist', sub, 'index.js')).href;
const SPECIFIERS: Record<string, string> = { sabre: dist(''), 'sabre/kernels': dist('kernels'), 'sabre/metrics': dist('metrics') };

function program(b: Block): string {
  const js = ts.transpileModule(b.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  return js.replace(/from '(sabre(?:\/\w+)?)'/g, (all, spec: string) => (SPECIFIERS[spec] ? `from '${SPECIFIERS[spec]}'` : all));
}

function run(file: string, cwd: string, ms: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}

describe.concurrent('documentation code blocks', () => {
  it('every ts/js block is a program or fenced as a fragment, and the README has programs', () => {
    expect(programs.filter((b) => b.file === 'README.md').length).toBeGreaterThanOrEqual(4);
  });

  for (const b of programs) {
    it(`${b.file}:${b.line} runs as written`, async () => {
      const dir = fs.mkdtempSync(join(tmpdir(), 'sabre-snippet-'));
      try {
        fs.writeFileSync(join(dir, 'snippet.mjs'), program(b));
        const r = await run(join(dir, 'snippet.mjs'), dir, 45_000);
        expect(r.code, `exit ${r.code} (null: killed at the deadline, it never ended)\n${r.out}`).toBe(0);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);
  }
});
