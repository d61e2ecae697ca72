import { defineConfig } from 'vitest/config';

// Files that replace module functions, timers or the environment for their own tests (vi.mock,
// vi.spyOn, fake timers, process.env), and files that bound this process's heap, memory or
// event-loop stalls (the fuzz campaigns, the memory-bound attacks): they get a process of their
// own each, so nothing they change can reach another file and no other file's garbage is in
// what they measure (a tcp fuzz slice saw an 88 ms full GC of a heap shared with earlier files).
const ISOLATED = [
  'test/fuzz/*.test.ts',
  'test/attack/tcp-orphan-rtr.test.ts',
  'test/attack/tcp-unowned-flood.test.ts',
  'test/attack/tcp-unowned-tiny.test.ts',
  'test/rdmap/srd-qp-answer-bytes.test.ts',
  'test/rdmap/bounds.test.ts',
  'test/transport/tcp/held-memory.test.ts',
  'test/transport/tcp/attack.test.ts',
  'test/transport/udp/attack.test.ts',
  'test/nic/open-deadline.test.ts',
  'test/nic/region-fence.test.ts',
  'test/dedup/buffers.test.ts',
  'test/files/jail-race.test.ts',
  'test/files/fsync.test.ts',
  'test/cli/front-door.test.ts',
  'test/transport/tcp/not-ready.test.ts',
  'test/transport/tcp/flush.test.ts',
  'test/attack/dedup-hello-refused.test.ts',
  'test/attack/tcp-ipv6-prefix.test.ts',
];

// Files that spend most of their time waiting (deadlines, keepalives, silent or stalled peers,
// blocked event loops, child processes that sleep): measured, each used less than 0.4 of a core
// over its wall time (a setup file logging process.cpuUsage() and the children's CPU per file,
// full run of 2026-11-30: 53 files, 363 s of wall time, 72 s of CPU). They run first, four at a
// time, while tsc and dependency-cruiser (~35 s of CPU, scripts/test.mjs) fill the cores they
// leave idle; the rest, whose files keep a core busy, run two at a time after them. A file
// missing here only runs in the two-at-a-time group: slower, never less safe.
const WAITING = [
  'test/attack/client-silent-server.test.ts',
  'test/attack/cm-late-answer-deadline.test.ts',
  'test/attack/cm-oversized.test.ts',
  'test/attack/cm-ports-reflect.test.ts',
  'test/attack/dedup-reply-untaken.test.ts',
  'test/attack/dedup-stalled-receiver.test.ts',
  'test/attack/dedup-stalled-sender.test.ts',
  'test/attack/dedup-untaken.test.ts',
  'test/attack/files-fd-exhaust.test.ts',
  'test/attack/files-preauth-malformed.test.ts',
  'test/attack/tcp-connect-secret-edges.test.ts',
  'test/attack/tcp-half-closed.test.ts',
  'test/attack/tcp-peerkey-nonce-claim.test.ts',
  'test/attack/tcp-qp-hijack.test.ts',
  'test/attack/tcp-raw-connect-guess.test.ts',
  'test/attack/tcp-rtr-deadline.test.ts',
  'test/attack/tcp-stalled-rtr.test.ts',
  'test/attack/tcp-stranger-connected.test.ts',
  'test/attack/udp-evict-connected.test.ts',
  'test/channel/dedup-slow-basis.test.ts',
  'test/channel/rendezvous-read-deadline.test.ts',
  'test/cli/perf-baseline-token.test.ts',
  'test/cli/perf-control-peer.test.ts',
  'test/cli/perf-control-server.test.ts',
  'test/cli/perf-hostile-baseline.test.ts',
  'test/cli/perf-hostile-connect.test.ts',
  'test/cli/perf-hostile-report.test.ts',
  'test/cli/progress.test.ts',
  'test/cm/relay.test.ts',
  'test/files/lifecycle.test.ts',
  'test/files/preauth-dedup.test.ts',
  'test/files/preauth.test.ts',
  'test/lifecycle/exit.test.ts',
  'test/metrics/metrics-hostile.test.ts',
  'test/nic/close-dead-features.test.ts',
  'test/nic/device-fatal.test.ts',
  'test/nic/hung-nic.test.ts',
  'test/nic/mailbox.test.ts',
  'test/nic/qp-fence.test.ts',
  'test/nic/shared-atomics.test.ts',
  'test/nic/shared-dereg.test.ts',
  'test/relay.test.ts',
  'test/tools/wireshark.test.ts',
  'test/transport/tcp/crossing.test.ts',
  'test/transport/tcp/dial-source.test.ts',
  'test/transport/tcp/integrity.test.ts',
  'test/transport/udp-engine/vanish.test.ts',
  'test/verbs/connect-secret.test.ts',
  'test/verbs/connect-timeout.test.ts',
  'test/verbs/error-causes.test.ts',
  'test/verbs/events.test.ts',
  'test/verbs/send-fence-tcp-edges.test.ts',
  'test/verbs/unused-fields.test.ts',
];

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Two files at a time on two cores: most files wait on sockets, child processes and timers
    // (a full run keeps ~1.1 cores busy with one), and the suites are built to pass under load.
    // Three at a time for all of them was tried (618 s instead of 663 s) and reverted: the
    // isolated files' event-loop stall bounds failed with three CPU-bound files and the checks
    // at once. So only the waiting files (above) get more, in a group of their own.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'waiting',
          include: WAITING,
          maxWorkers: 4,
          sequence: { groupOrder: 0 },
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: [...ISOLATED, ...WAITING],
          sequence: { groupOrder: 1 },
          // The other files run one after another in each worker process, which imports sabre's
          // modules once instead of once per file: a fresh module graph per file (vitest's
          // default) was ~150 s of a full run's ~900 s on two cores. Tests hold no module state
          // between them (devices, listeners and servers are closed by the test that opened them).
          isolate: false,
        },
      },
      { extends: true, test: { name: 'isolated', include: ISOLATED, sequence: { groupOrder: 1 } } },
    ],
  },
});
