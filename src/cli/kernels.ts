// `sabre kernels`: check each data-plane kernel on known vectors, then time it on 64 KiB.
// A newcomer sees at once whether the WASM module loaded and behaves.
import { crc32c, xxh128 } from '../kernels/index.js';
import type { Command } from './command.js';
import { UsageError } from './usage.js';

export const kernelsCommand: Command = {
  name: 'kernels',
  summary: 'data-plane kernel self-check and throughput (CRC32C, XXH3-128)',
  help: () => 'usage: sabre kernels\n\nSelf-check the data-plane kernels against known vectors and print their throughput.',
  async run(argv, io) {
    if (argv.length > 0) throw new UsageError(`kernels takes no arguments, got '${argv[0]}'`);
    return kernelReport(io.out);
  },
};

export function kernelReport(out: (l: string) => void): number {
  const enc = new TextEncoder();
  const checks: [string, boolean][] = [
    ['crc32c("123456789") = 0xe3069283', crc32c(enc.encode('123456789')) === 0xe3069283],
    ['crc32c(32 zero bytes) = 0x8a9136aa (RFC 3720 B.4)', crc32c(new Uint8Array(32)) === 0x8a9136aa],
    ['xxh128("") = 0x99aa06d3014798d86001c324468d497f', xxh128(new Uint8Array(0)) === 0x99aa06d3014798d86001c324468d497fn],
  ];
  let ok = true;
  for (const [name, pass] of checks) {
    out(`  ${pass ? 'ok  ' : 'FAIL'}  ${name}`);
    ok &&= pass;
  }
  const buf = new Uint8Array(65536);
  for (let i = 0; i < buf.length; i++) buf[i] = (i * 131 + 7) & 0xff;
  for (const [name, fn] of [
    ['crc32c', () => crc32c(buf)],
    ['xxh128', () => xxh128(buf)],
  ] as const) {
    for (let i = 0; i < 200; i++) fn();
    const n = 2000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn();
    const s = (performance.now() - t0) / 1000;
    out(`  ${name.padEnd(8)} 64 KiB: ${((n * buf.length) / s / 1e9).toFixed(2)} GB/s (sabre/kernels API, includes the copy into WASM memory)`);
  }
  return ok ? 0 : 1;
}
