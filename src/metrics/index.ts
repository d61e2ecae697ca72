// Observability: Prometheus metrics (prom-client) and structured diagnostics
// (node:diagnostics_channel). See docs/observability.md.
export { SabreMetrics, DEVICE_STATS, MEMORY_STATS, LINK_STATS, CONTEXT_STATS } from './registry.js';
export type { SabreMetricsOptions, StatMetric, ContextMetric, Kind as StatKind, Labels } from './registry.js';
export { startMetricsServer } from './server.js';
export type { MetricsServer } from './server.js';
export { DIAGNOSTIC_CHANNELS, publish, diagnosticsFromEnv } from './diagnostics.js';
export type { DiagnosticChannel } from './diagnostics.js';
