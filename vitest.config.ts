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

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Two files at a time on two cores: most files wait on sockets, child processes and timers
    // (a full run keeps ~1.1 cores busy with one), and the suites are built to pass under load.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: ISOLATED,
          // The other files run one after another in each worker process, which imports sabre's
          // modules once instead of once per file: a fresh module graph per file (vitest's
          // default) was ~150 s of a full run's ~900 s on two cores. Tests hold no module state
          // between them (devices, listeners and servers are closed by the test that opened them).
          isolate: false,
        },
      },
      { extends: true, test: { name: 'isolated', include: ISOLATED } },
    ],
  },
});
