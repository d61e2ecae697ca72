// The layering of src/, checked by `npm test` (dependency-cruiser). Imports run one way:
//
//   cli (the `sabre` command)
//     → metrics (the `sabre/metrics` entry: reads stats through verbs), index (the public API),
//       features (channel, files, dedup)
//     → cm → verbs → nic → { rdmap, transport } → { kernels → dataplane → wire } → core
//
// rdmap (the sans-I/O engine) and transport (the links) are siblings that meet only in core;
// the NIC's driver (src/nic/) is the one loop that joins them, and its provider registry is how
// verbs opens a transport without naming one. cm speaks verbs only.
// Features built above cm and verbs use the public API, never engine or link internals, and
// nothing imports the CLI. The features stack dedup → channel → files (each imports only those
// before it), and so do their protocol specs in wire/ (*-spec.ts), which nothing below the
// features imports. Type-only imports count like any other in the layer rules: a type
// is a dependency too.
//
// Cycles: none, type-only ones included, with one named exception. The verbs objects name
// their owners as ibverbs' structs do (an AH, MR or QP its PD: qp.pd; a PD its device:
// pd.device), and the owner builds them (dev.allocPd(), pd.createQp()); both are public types
// that code above uses as exactly those classes (a Device as a map key, a QP's PD handed on as
// a ProtectionDomain), so owner and owned name each other. That knot is allowed only as it is:
// the edges of VERBS_KNOT (the type-only back-references mr/ah/qp → pd and pd → device, and the
// owners' imports of what they build), closing only through type-only imports; a new edge in
// it, or a cycle through any other module, fails, as does every other cycle in src.
/** @type {import('dependency-cruiser').IConfiguration} */
const layer = (from, allowed, comment) => ({
  name: `${from.replace(/[^a-z]/g, '') || 'index'}-imports-only-below`,
  comment,
  severity: 'error',
  from: { path: `^src/${from}` },
  to: { path: '^src/', pathNot: [`^src/${from}`, ...allowed.map((a) => `^src/${a}`)] },
});

/**
 * The one place a (type-only) cycle may close: each verbs object file and the files of the knot
 * it may import while in a cycle. Back-references to an owner: mr, ah, qp → pd; pd → device.
 */
const VERBS_KNOT = {
  device: ['pd', 'qp', 'types'],
  pd: ['device', 'ah', 'mr', 'qp', 'types'],
  qp: ['pd', 'ah', 'types'],
  mr: ['pd'],
  ah: ['pd'],
  types: ['ah'],
};
const verbsFile = (names) => `^src/verbs/(${names.join('|')})[.]ts$`;
const VERBS_OBJECTS = verbsFile(Object.keys(VERBS_KNOT));

/**
 * The features' protocol specs in src/wire/ (dedup-spec.ts, channel-spec.ts, files-spec.ts) and
 * the accessors scripts/gen-wire.mjs generates from each (dedup-fields.gen.ts, …).
 */
const featureSpec = (names) => `^src/wire/(${names.join('|')})-spec[.]ts$`;
const featureFields = (names) => `^src/wire/(${names.join('|')})-fields[.]gen[.]ts$`;
/** The features above cm, bottom to top: each may import those before it, never those after. */
const FEATURES = ['dedup', 'channel', 'files'];
const FEATURE_SPEC = featureSpec(FEATURES);
const FEATURE_FIELDS = featureFields(FEATURES);
/** Every generated TypeScript file (src/wire/*.gen.ts). */
const GENERATED = '^src/wire/[a-z-]*[.]gen[.]ts$';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycle anywhere in src, type-only ones included. A cycle through the verbs objects and any other module is reported from that module.',
      severity: 'error',
      from: { path: '^src/', pathNot: VERBS_OBJECTS },
      to: { circular: true },
    },
    {
      name: 'no-circular-verbs-objects-runtime',
      comment: 'The verbs objects: no cycle of runtime imports (only type-only back-references to an owner).',
      severity: 'error',
      from: { path: VERBS_OBJECTS },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    ...Object.entries(VERBS_KNOT).map(([file, may]) => ({
      name: `no-circular-verbs-${file}`,
      comment: `verbs/${file}.ts: in a cycle only through the knot's own edges (${may.join(', ')}).`,
      severity: 'error',
      from: { path: verbsFile([file]) },
      to: { circular: true, pathNot: verbsFile(may) },
    })),
    layer('core/', [], 'core is the shared vocabulary: it imports nothing of sabre.'),
    layer('wire/', ['core/'], 'wire formats: only core below them.'),
    layer('dataplane/', ['core/', 'wire/'], 'the data plane reads its record layouts from wire/spec.ts.'),
    layer('kernels/', ['core/', 'wire/', 'dataplane/'], 'kernels load the data-plane module.'),
    layer('rdmap/', ['core/', 'wire/', 'dataplane/', 'kernels/'], 'the engine never sees a link (transport/) or the verbs objects.'),
    layer('transport/', ['core/', 'wire/', 'dataplane/', 'kernels/'], 'links move frames: they never see the engine (rdmap/) or the verbs objects.'),
    layer('nic/', ['core/', 'wire/', 'dataplane/', 'kernels/', 'rdmap/', 'transport/'], 'the software NIC: its driver joins the engine to a link, its providers open the transports; nothing above it.'),
    layer('verbs/', ['core/', 'wire/', 'dataplane/', 'kernels/', 'rdmap/', 'nic/'], 'verbs drives the NIC and names no transport: it opens one through the provider registry (src/nic/providers.ts).'),
    layer('cm/', ['core/', 'verbs/'], 'cm speaks verbs only.'),
    {
      name: 'nothing-imports-cli',
      comment: 'The `sabre` command is the top: no module of the library imports it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    layer('cli/', ['index[.]ts$', 'core/', 'verbs/', 'cm/', 'channel/', 'files/', 'dedup/', 'kernels/', 'metrics/'], 'the CLI sits above cm with the features (DESIGN §2): it uses the public API, the features and metrics, never engine, link, data-plane or wire internals.'),
    layer('metrics/', ['core/', 'verbs/'], 'metrics reads stats through the verbs objects (dev.stats(), qp.state, cq.count) and the enums of core; features reach it as stats sources of the device, not by import.'),
    layer('(channel|files|dedup)/', ['core/', 'wire/', 'verbs/', 'cm/', 'kernels/', 'dataplane/'], 'features use the verbs and cm API (and their wire layouts, the kernels and the data plane), not engine or link internals, and not src/index.ts, which re-exports them.'),
    // The features stack: dedup at the bottom, channels on it (dedup sends), the file service on
    // both (its dedup channels). Each one's protocol is its own spec in wire/ (FEATURE_SPEC), and
    // the specs stack the same way.
    ...FEATURES.slice(0, -1).map((f, i) => ({
      name: `${f}-below-${FEATURES.slice(i + 1).join('-')}`,
      comment: `${f} sits below ${FEATURES.slice(i + 1).join(' and ')}: neither its modules nor its spec import theirs.`,
      severity: 'error',
      from: { path: [`^src/${f}/`, featureSpec([f])] },
      to: { path: [`^src/(${FEATURES.slice(i + 1).join('|')})/`, featureSpec(FEATURES.slice(i + 1)), featureFields(FEATURES.slice(i + 1))] },
    })),
    {
      name: 'rdma-layers-no-feature-specs',
      comment: 'wire by layer: the RDMA layers (core … cm) and their wire files never read a feature\'s protocol. spec.ts re-exports the feature specs only for importers not yet moved to them.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/(channel|files|dedup|cli)/', '^src/index[.]ts$', FEATURE_SPEC, '^src/wire/spec[.]ts$'] },
      to: { path: [FEATURE_SPEC, FEATURE_FIELDS] },
    },
    {
      name: 'generated-imports-codec-only',
      comment: 'the generated accessors (src/wire/*.gen.ts) import nothing but the byte helpers of wire/codec.ts: never a spec, so a stale generated file still compiles and `npm run gen` (which compiles, then generates) can always run.',
      severity: 'error',
      from: { path: GENERATED },
      to: { path: '^src/', pathNot: '^src/wire/codec[.]ts$' },
    },
    {
      name: 'specs-not-from-generated',
      comment: 'the specs are what the generator reads (compiled to dist/wire/): one that imported a file generated from them would need itself to be built first.',
      severity: 'error',
      from: { path: '^src/wire/([a-z-]*spec|layout)[.]ts$' },
      to: { path: GENERATED },
    },
    {
      name: 'feature-specs-import-layouts-only',
      comment: 'a feature spec is written in the layout vocabulary (wire/layout.ts) and may name the specs of the features below it, nothing else.',
      severity: 'error',
      from: { path: FEATURE_SPEC },
      to: { path: '^src/', pathNot: ['^src/wire/layout[.]ts$', FEATURE_SPEC] },
    },
    {
      name: 'channel-files-read-their-own-spec',
      comment: 'channel and file-service modules take their layouts from their specs, not through the spec.ts re-exports (the dedup bridges, owned with src/dedup/, are not moved yet).',
      severity: 'error',
      from: { path: '^src/(channel|files)/', pathNot: '^src/(channel|files)/dedup[.]ts$' },
      to: { path: '^src/wire/spec[.]ts$' },
    },
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
