// helper: CRC32C tables
export const POLY = 0x82f63b78;
export function t0() { const t = new Uint32Array(256); for (let b = 0; b < 256; b++) { let c = b; for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1; t[b] = c >>> 0; } return t; }
export function slicing(n) { const T0 = t0(); const out = [T0]; for (let k = 1; k < n; k++) { const p = out[k-1], t = new Uint32Array(256); for (let b = 0; b < 256; b++) t[b] = (p[b] >>> 8) ^ T0[p[b] & 0xff]; out.push(t); } return out; }
export function zeros(s, L) { const T0 = t0(); for (let i = 0; i < L; i++) s = (T0[s & 0xff] ^ (s >>> 8)) >>> 0; return s; }
export function shiftTable(L) { const out = []; for (let k = 0; k < 4; k++) { const t = new Uint32Array(256); for (let b = 0; b < 256; b++) t[b] = zeros((b << (8*k)) >>> 0, L); out.push(t); } return out; }
export function fmt(tables) { const lines = []; for (const t of tables) for (let i = 0; i < 256; i += 8) lines.push('  ' + Array.from(t.slice(i, i+8), (v) => '0x' + v.toString(16).padStart(8, '0')).join(', ') + ','); return lines.join('\n'); }
