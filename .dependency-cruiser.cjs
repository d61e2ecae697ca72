// The layering of src/, checked by `npm test` (dependency-cruiser). Imports run one way:
//
//   cli, index (the public API), features (channel, files, dedup)
//     → cm → verbs → { rdmap, transport } → { kernels → dataplane → wire } → core
//
// rdmap (the sans-I/O engine) and transport (the links) are siblings that meet only in core;
// the device (src/verbs/device.ts) is the one shell that joins them. cm speaks verbs only.
// Features built above cm and verbs use the public API, never engine or link internals.
// Type-only imports count like any other in the layer rules: a type is a dependency too.
//
// Cycles: none through runtime imports, anywhere; and none at all that leaves a folder. What
// remains allowed is a type-only back-reference inside one folder — the verbs objects name
// their owners (a QP its PD, a PD its device), as ibverbs' structs do — which no module load
// order and no layer can trip over.
/** @type {import('dependency-cruiser').IConfiguration} */
const layer = (from, allowed, comment) => ({
  name: `${from.replace(/[^a-z]/g, '') || 'index'}-imports-only-below`,
  comment,
  severity: 'error',
  from: { path: `^src/${from}` },
  to: { path: '^src/', pathNot: [`^src/${from}`, ...allowed.map((a) => `^src/${a}`)] },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No cycle of runtime imports anywhere in src.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'no-circular-across-folders',
      comment: 'No cycle, type-only ones included, that leaves the folder it starts in.',
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { circular: true, via: { pathNot: '^src/$1/' } },
    },
    layer('core/', [], 'core is the shared vocabulary: it imports nothing of sabre.'),
    layer('wire/', ['core/'], 'wire formats: only core below them.'),
    layer('dataplane/', ['core/', 'wire/'], 'the data plane reads its record layouts from wire/spec.ts.'),
    layer('kernels/', ['core/', 'wire/', 'dataplane/'], 'kernels load the data-plane module.'),
    layer('rdmap/', ['core/', 'wire/', 'dataplane/', 'kernels/'], 'the engine never sees a link (transport/) or the verbs objects.'),
    layer('transport/', ['core/', 'wire/', 'dataplane/', 'kernels/'], 'links move frames: they never see the engine (rdmap/) or the verbs objects.'),
    layer('verbs/', ['core/', 'wire/', 'dataplane/', 'kernels/', 'rdmap/', 'transport/'], 'verbs joins an engine to a link; nothing above it.'),
    layer('cm/', ['core/', 'verbs/'], 'cm speaks verbs only.'),
    layer('(channel|files|dedup)/', ['core/', 'wire/', 'verbs/', 'cm/', 'kernels/', 'dataplane/'], 'features use the verbs and cm API (and their wire layouts, the kernels and the data plane), not engine or link internals, and not src/index.ts, which re-exports them.'),
    {
      name: 'src-not-to-tests',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(build|dist)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    moduleSystems: ['es6'],
  },
};
