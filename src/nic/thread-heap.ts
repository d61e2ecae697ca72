// The NIC thread's heap. node:dgram hands every datagram over in a Buffer of its own, whose
// bytes are external memory: at tens of thousands of 64 KiB datagrams a second the thread
// allocates hundreds of MB/s outside its heap, and the Buffers die at once. V8 frees them when
// a scavenge sweeps the young generation, and scavenges come as the young generation fills —
// with V8's default young generation (16 MiB semi-spaces) and a receive path that allocates
// few JavaScript objects per datagram, tens of MB of dead Buffers piled up between two. V8
// counts them against a global limit derived from the small old generation (~9 MB live here),
// so a udp target's NIC thread started incremental marking and ran a full mark-compact every
// 30–50 ms of a 64 KiB write stream (~45 ms of CPU each, marking threads included).
//
// A 3 MiB young generation (1 MiB semi-spaces) scavenges often enough that the dead Buffers
// never reach that limit: no full collection in the stream, the receiving NIC thread's CPU per
// GB down by 35–40%, its process's peak RSS down ~20 MiB, and no change for tcp, for 64 B
// messages, or for idle channels' RSS (docs/benchmarks.md). A Worker's own resource limit, so
// the application's heap and its other workers are untouched. (Raising the old generation's
// initial limit to 64 MiB did as much for the CPU but cost ~1 KiB more RSS per idle channel,
// and it is a process-wide V8 flag.)
export const NIC_RESOURCE_LIMITS = Object.freeze({ maxYoungGenerationSizeMb: 3 });
