// The vocabulary of the wire specs: a layout is data (fields with offsets, sizes, types, bit
// masks, meanings and sources) that codecs, scripts/gen-wire.mjs and the docs all read; a code
// table names the values of one field. spec.ts (the RFC layouts, sabre's udp transport and the
// data-plane records) and each feature's spec (dedup-spec.ts, channel-spec.ts, files-spec.ts)
// are written in it.

/** f64: a JS number as written (host records only: the data plane and the wires read integers). */
export type FieldType = 'u8' | 'u16' | 'u32' | 'u64' | 'f64' | 'bytes';

export interface BitSpec {
  /** Mask within the containing field (already positioned, e.g. 0x80 for the top bit of a u8). */
  readonly mask: number;
  readonly meaning: string;
}

export interface FieldSpec {
  readonly offset: number;
  readonly size: number;
  readonly type: FieldType;
  readonly meaning: string;
  readonly ref: string;
  /** Sub-fields packed in this field, by name. */
  readonly bits?: Readonly<Record<string, BitSpec>>;
}

export interface LayoutSpec<F extends string = string> {
  readonly name: string;
  readonly title: string;
  /** Fixed size in bytes (variable tails are described in `tail`). */
  readonly size: number;
  readonly ref: string;
  readonly byteOrder: 'big-endian' | 'little-endian';
  readonly fields: Readonly<Record<F, FieldSpec>>;
  /** What may follow the fixed part. */
  readonly tail?: string;
  readonly sabre?: boolean;
}

export function layout<F extends string>(l: LayoutSpec<F>): LayoutSpec<F> {
  // Catch a wrong offset at import time rather than as a silently shifted field on the wire.
  let end = 0;
  const sorted = Object.entries<FieldSpec>(l.fields).sort((a, b) => a[1].offset - b[1].offset);
  for (const [name, f] of sorted) {
    if (f.offset < end) throw new Error(`wire spec ${l.name}.${name} overlaps the previous field`);
    const width = { u8: 1, u16: 2, u32: 4, u64: 8, f64: 8, bytes: f.size }[f.type];
    if (width !== f.size) throw new Error(`wire spec ${l.name}.${name}: size ${f.size} does not fit ${f.type}`);
    end = f.offset + f.size;
  }
  if (end !== l.size) throw new Error(`wire spec ${l.name}: fields end at ${end}, size says ${l.size}`);
  return l;
}

export interface CodeSpec {
  readonly code: number;
  readonly name: string;
  readonly meaning: string;
}

/** name → code of a code table, typed from the table itself (one table per fact). */
export type CodeMap<T extends readonly CodeSpec[]> = { readonly [E in T[number] as E['name']]: E['code'] };
export function codeMap<const T extends readonly CodeSpec[]>(table: T): CodeMap<T> {
  return Object.freeze(Object.fromEntries(table.map((e) => [e.name, e.code]))) as CodeMap<T>;
}
