// A service-sized live heap for the transport benches (issue #18): `mb` MiB of doubles held on
// the V8 heap. A bench process holds ~9 MiB of live objects; V8 sizes the old generation's
// allocation limit from that, and while the room left under the limit is below the young
// generation's capacity (which grows to 16 MiB under sabre's per-datagram allocation) it
// starts incremental marking at once, again after every full collection. The receiver then
// ran a mark-compact every ~30 ms (`node --trace-gc`), with concurrent marking on V8's helper
// threads costing ~45% of a CPU. A service embedding sabre has a larger live heap and does
// not see this; the benches report both. A double array holds no pointers, so marking it
// costs next to nothing; it is allocated (and dropped) in both processes alike, so the raw
// baselines run under the same heap.
let held;

/** Hold `mb` MiB of live heap (0: drop it). */
export function holdServiceHeap(mb) {
  held = mb > 0 ? new Array(Math.round((mb << 20) / 8)).fill(1.5) : undefined;
  return held?.length ?? 0;
}

/** The peer's op for it (spread into a bench's ops table): serviceHeap({ mb }). */
export const serviceHeapOps = { serviceHeap: ({ mb }) => holdServiceHeap(mb) };

/** Hold (or drop, 0) `mb` MiB in this process and, through `call`, in the peer. */
export async function holdServiceHeapBoth(call, mb) {
  holdServiceHeap(mb);
  await call('serviceHeap', { mb });
}
