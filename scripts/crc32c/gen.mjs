// Generates assembly/crc32c.ts (tables and the unrolled v128 byte-plane code) — `node scripts/crc32c/gen.mjs assembly/crc32c.ts`.
// test/kernels/crc32c-gen.test.ts fails when the committed kernel differs from what this writes.
import { t0, slicing, shiftTable, fmt } from './tables.mjs';
import { writeFileSync } from 'node:fs';
const T = t0();
const nib = [];
for (let i = 0; i < 4; i++) for (let h = 0; h < 2; h++) for (let n = 0; n < 16; n++) nib.push((T[h ? n << 4 : n] >>> (8 * i)) & 0xff);
const nibRows = [];
for (let r = 0; r < 8; r++) nibRows.push('  ' + nib.slice(16 * r, 16 * r + 16).map((b) => '0x' + b.toString(16).padStart(2, '0')).join(', ') + ',');

// 16x16 byte transpose by four rounds of unpack (lo/hi halves at 1, 2, 4, 8-byte granularity),
// pairing vector i with i+g; traced symbolically to find which result holds which plane.
function transpose(ind) {
  let vec = [...Array(16).keys()].map((j) => [...Array(16).keys()].map((k) => [j, k]));
  let names = [...Array(16).keys()].map((j) => `l${j}`);
  let code = '';
  let n = 0;
  for (const g of [1, 2, 4, 8]) {
    const nv = [], nn = [];
    for (let i = 0; i < 16; i++) {
      if (i & g) continue;
      for (const half of [0, 1]) {
        const idx = [];
        for (let u = 0; u < 8 / g; u++) for (const src of [0, 1]) for (let e = 0; e < g; e++) idx.push(src * 16 + half * 8 + u * g + e);
        const name = `t${n++}`;
        code += `${ind}const ${name} = i8x16.shuffle(${names[i]}, ${names[i + g]}, ${idx.join(', ')});\n`;
        nv[half ? i + g : i] = idx.map((x) => (x < 16 ? vec[i][x] : vec[i + g][x - 16]));
        nn[half ? i + g : i] = name;
      }
    }
    vec = nv;
    names = nn;
  }
  const plane = [];
  for (let k = 0; k < 16; k++) {
    const vi = vec.findIndex((v) => v.every(([j, kk], pos) => kk === k && j === pos));
    if (vi < 0) throw new Error('transpose plan broken');
    plane.push(names[vi]);
  }
  return { code, plane };
}

function simdFn(S, name, shiftName) {
  const ind = '      ';
  const { code, plane } = transpose(ind);
  let s = `/** \`blocks\` blocks of ${16 * S} bytes at p: 16 lanes of ${S} bytes each, one per byte of a v128. */
function ${name}(crc: u32, p: usize, blocks: usize): u32 {
  const m = i8x16.splat(0x0F);
  for (let b: usize = 0; b < blocks; b++) {
    // Lane 0 continues the running CRC; lanes 1..15 start from 0 and are joined below.
    let v0 = i8x16.replace_lane(i8x16.splat(0), 0, <i8>crc);
    let v1 = i8x16.replace_lane(i8x16.splat(0), 0, <i8>(crc >> 8));
    let v2 = i8x16.replace_lane(i8x16.splat(0), 0, <i8>(crc >> 16));
    let v3 = i8x16.replace_lane(i8x16.splat(0), 0, <i8>(crc >> 24));
    const end = p + ${S};
    do {
      // Sixteen bytes of each lane, then transposed so that plane k holds byte k of every lane.
`;
  for (let j = 0; j < 16; j++) s += `${ind}const l${j} = v128.load(p, ${j * S});\n`;
  s += code;
  s += `${ind}// One CRC byte step per plane: s = T[(s ^ byte) & 0xFF] ^ (s >> 8) in all lanes at once.\n`;
  for (let k = 0; k < 16; k++) s += `${ind}STEP(${plane[k]});\n`;
  s += `      p += 16;
    } while (p < end);
    crc = LANE(0);
`;
  for (let j = 1; j < 16; j++) s += `    crc = shift(crc, ${shiftName}) ^ LANE(${j});\n`;
  s += `    p += ${15 * S};
  }
  return crc;
}
`;
  // expand STEP and LANE textually (AS needs constant lane indices and has no macros)
  s = s.replace(/^(\s*)STEP\((\w+)\);$/gm, (_, i, d) => `${i}{
${i}  const x = v128.xor(v0, ${d});
${i}  const lo = v128.and(x, m);
${i}  const hi = v128.and(i16x8.shr_u(x, 4), m);
${i}  const n0 = v128.xor(v128.xor(v1, i8x16.swizzle(v128.load(NIBBLE), lo)), i8x16.swizzle(v128.load(NIBBLE, 16), hi));
${i}  const n1 = v128.xor(v128.xor(v2, i8x16.swizzle(v128.load(NIBBLE, 32), lo)), i8x16.swizzle(v128.load(NIBBLE, 48), hi));
${i}  const n2 = v128.xor(v128.xor(v3, i8x16.swizzle(v128.load(NIBBLE, 64), lo)), i8x16.swizzle(v128.load(NIBBLE, 80), hi));
${i}  v3 = v128.xor(i8x16.swizzle(v128.load(NIBBLE, 96), lo), i8x16.swizzle(v128.load(NIBBLE, 112), hi));
${i}  v0 = n0;
${i}  v1 = n1;
${i}  v2 = n2;
${i}}`);
  s = s.replace(/LANE\((\d+)\)/g, (_, j) => `lane(v0, v1, v2, v3, ${j})`.replace(/lane\(v0, v1, v2, v3, (\d+)\)/, (__, jj) =>
    `(<u32>i8x16.extract_lane_u(v0, ${jj}) | (<u32>i8x16.extract_lane_u(v1, ${jj}) << 8)\n      | (<u32>i8x16.extract_lane_u(v2, ${jj}) << 16) | (<u32>i8x16.extract_lane_u(v3, ${jj}) << 24))`));
  return s;
}

// Bytes per stream of each 16-stream SIMD path, longest first. Longer streams hide memory
// latency better on data not in cache: the hardware prefetcher needs a few lines to lock on to
// each of the 16 streams, and at 1 KiB (16 lines) per stream most of a block came in as demand
// misses (64 KiB from DRAM: 23 µs at 1024, 18 µs at 2048, hot data 14 µs either way).
const SIMD = [2048, 1024, 64], PAIR = 128;
const src = `// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI (RFC 3720), MPA
// FPDUs (RFC 5044) and sabre's UDP trailer.
//
// WebAssembly has no CRC or carry-less-multiply instruction, so this is table-driven, and the
// speed comes from parallelism: a block is cut into independent streams whose CRCs are
// computed side by side and then joined with a precomputed "append L zero bytes" operator
// (the software form of Intel's interleaved crc32c). CRC without the pre/post inversion is
// linear over GF(2), so crc(A ‖ B) = shift_|B|(crc(A)) ^ crc(B), crc(B) started from 0.
//
// Paths, by remaining length (the shape was chosen by measurement, bench/crc32c.bench.mjs):
// - blocks of ${SIMD.map((S) => 16 * S).join(', then ')} bytes: 16 streams, one per byte lane of a v128. The
//   CRC state is kept as four byte planes v0..v3 (v_i = byte i of each stream's state), so the
//   ">> 8" of the byte-at-a-time recurrence is a rename (v0 <- v1 ...) and the table lookup
//   T[x] = T[x & 15] ^ T[x & 0xF0] is done with i8x16.swizzle on 16-entry nibble tables, one
//   per state byte: eight swizzles advance 16 streams by one byte. Input is loaded 16 bytes
//   per stream and transposed (64 shuffles that V8 emits as punpck*) into byte planes.
// - blocks of ${2 * PAIR} bytes: two scalar slicing-by-8 chains interleaved. (Scalar-only, 2 chains beat
//   3–6 chains: more spill registers in V8's x64 code; slicing-by-16, byte loads and loop
//   unrolling did not pay.)
// - then slicing-by-8, then bytes.
// Scalar table indices are \`(w >> (8k-2)) & 0x3FC\` (shift and mask, already scaled by 4) and
// every table address is a constant folded into the load's offset immediate.
//
// Constant data and pure functions only: safe on a shared memory, any thread, any alignment.
import { CRC_BATCH_DESC_SIZE, getCrcBatchDescLen, getCrcBatchDescPrevious, getCrcBatchDescPtr, setCrcBatchDescOut } from './wire.gen';

// Slicing tables: SLICE + k*1024 holds T_k, where T_0 is the byte-at-a-time table and
// T_k[b] = (T_{k-1}[b] >> 8) ^ T_0[T_{k-1}[b] & 0xFF] (the CRC of b followed by k zero bytes).
const SLICE: usize = memory.data<u32>([
${fmt(slicing(8))}
]);

// NIBBLE + 32*i: byte i of T_0[n] (first 16) and of T_0[n << 4] (next 16), n = 0..15.
const NIBBLE: usize = memory.data<u8>([
${nibRows.join('\n')}
], 16);

// Join operators: SHIFT_L + k*1024 maps byte k of a raw CRC state to the state after L more
// zero bytes, so shift(crc(A)) ^ crc(B) = crc(A ‖ B) for |B| = L.
${SIMD.map((S) => `const SHIFT_${S}: usize = memory.data<u32>([
${fmt(shiftTable(S))}
]);`).join('\n')}
const SHIFT_${PAIR}: usize = memory.data<u32>([
${fmt(shiftTable(PAIR))}
]);

@inline function shift(s: u32, z: usize): u32 {
  return load<u32>(z + ((s << 2) & 0x3FC))
    ^ load<u32>(z + ((s >> 6) & 0x3FC), 1 << 10)
    ^ load<u32>(z + ((s >> 14) & 0x3FC), 2 << 10)
    ^ load<u32>(z + ((s >> 22) & 0x3FC), 3 << 10);
}

/** Eight bytes at p into raw state crc. */
@inline function slice8(crc: u32, p: usize): u32 {
  const lo = load<u32>(p) ^ crc;
  const hi = load<u32>(p, 4);
  return load<u32>((lo << 2) & 0x3FC, SLICE + (7 << 10))
    ^ load<u32>((lo >> 6) & 0x3FC, SLICE + (6 << 10))
    ^ load<u32>((lo >> 14) & 0x3FC, SLICE + (5 << 10))
    ^ load<u32>((lo >> 22) & 0x3FC, SLICE + (4 << 10))
    ^ load<u32>((hi << 2) & 0x3FC, SLICE + (3 << 10))
    ^ load<u32>((hi >> 6) & 0x3FC, SLICE + (2 << 10))
    ^ load<u32>((hi >> 14) & 0x3FC, SLICE + (1 << 10))
    ^ load<u32>((hi >> 22) & 0x3FC, SLICE);
}

${SIMD.map((S) => simdFn(S, 'lanes16x' + S, 'SHIFT_' + S)).join('')}
/** Raw (non-inverted) CRC update. */
function update(crc: u32, p: usize, len: usize): u32 {
${SIMD.map((S) => `  if (len >= ${16 * S}) {
    const blocks = len / ${16 * S};
    crc = lanes16x${S}(crc, p, blocks);
    p += blocks * ${16 * S};
    len -= blocks * ${16 * S};
  }
`).join('')}  while (len >= ${2 * PAIR}) {
    let a = crc;
    let b: u32 = 0;
    const end = p + ${PAIR};
    do {
      a = slice8(a, p);
      b = slice8(b, p + ${PAIR});
      p += 8;
    } while (p < end);
    crc = shift(a, SHIFT_${PAIR}) ^ b;
    p += ${PAIR};
    len -= ${2 * PAIR};
  }
  while (len >= 8) {
    crc = slice8(crc, p);
    p += 8;
    len -= 8;
  }
  while (len != 0) {
    crc = load<u32>(((crc ^ <u32>load<u8>(p)) << 2) & 0x3FC, SLICE) ^ (crc >> 8);
    p++;
    len--;
  }
  return crc;
}

/**
 * CRC32C of len bytes at ptr, continuing from \`previous\` (0 to start): the standard value
 * (pre- and post-inverted), so crc32c(b, crc32c(a, 0)) == crc32c(a ‖ b, 0).
 */
export function crc32c(ptr: usize, len: usize, previous: u32): u32 {
  return ~update(~previous, ptr, len);
}

/**
 * One call for a batch of buffers (the packet path). descPtr points at \`count\` crcBatchDesc
 * records (src/wire/spec.ts); each result is written to its descriptor's \`out\` field.
 */
export function crc32cBatch(descPtr: usize, count: u32): void {
  for (let i: u32 = 0; i < count; i++) {
    const d = descPtr + <usize>i * CRC_BATCH_DESC_SIZE;
    setCrcBatchDescOut(d, ~update(~getCrcBatchDescPrevious(d), <usize>getCrcBatchDescPtr(d), <usize>getCrcBatchDescLen(d)));
  }
}
`;
writeFileSync(process.argv[2], src);
