// Prometheus metrics for sabre services (prom-client): per device, QP, CQ, link and any feature
// that registers a stats source (channels, the file service). Everything is read at scrape time
// from the public API — dev.stats(), qp.state, cq.count — so an unscraped registry costs nothing
// on the data path. The mapping from stats keys to metric names is one table below; a stats key
// the table does not know still appears, as sabre_link_stat{stat="<key>"} or
// sabre_device_stat{stat="<key>"}, so a counter added to the engine is never silently lost.
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { qpStateName, wcOpcodeName, wcStatusName } from '../core/enums.js';
import { ErrorCode, SabreError } from '../core/errors.js';
import type { TransportContextStats } from '../core/link.js';
import type { CompletionQueue } from '../verbs/cq.js';
import type { Device } from '../verbs/device.js';
import type { ProtectionDomain } from '../verbs/pd.js';

/** The message when prom-client is missing: an embedder that never loads sabre/metrics needs none. */
export const PROM_CLIENT_MISSING = 'sabre/metrics needs prom-client: npm install prom-client';

// prom-client is an optional peer dependency, loaded when this module is: synchronously through
// require (a top-level await would stop require('sabre/metrics') from working), and turned into
// one clear error when it is not installed.
function loadPromClient(): typeof PromClient {
  try {
    return createRequire(import.meta.url)('prom-client') as typeof PromClient;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') throw new SabreError(ErrorCode.NotSupported, PROM_CLIENT_MISSING, { cause: e });
    throw e;
  }
}
const { collectDefaultMetrics, Counter: CounterClass, Gauge: GaugeClass, Histogram: HistogramClass, Registry: RegistryClass } = loadPromClient();

/** How a stats value is exported: a Prometheus counter (only grows) or gauge. */
export type Kind = 'counter' | 'gauge';

export interface StatMetric {
  /** Key in dev.stats() (engine counters), dev.stats().memory, or dev.stats().link. */
  readonly key: string;
  readonly name: string;
  readonly kind: Kind;
  readonly help: string;
  /** Extra fixed labels telling rows of one metric apart (path, direction, reason…). */
  readonly labels?: Readonly<Record<string, string>>;
}

const drop = (key: string, reason: string): StatMetric => ({ key, name: 'sabre_link_drops_total', kind: 'counter', help: 'datagrams or segments the link dropped, by reason', labels: { reason } });

/** dev.stats() engine counters (src/rdmap DeviceCounters). */
export const DEVICE_STATS: readonly StatMetric[] = [
  { key: 'directSegments', name: 'sabre_placed_segments_total', kind: 'counter', help: 'DDP segments placed, by path (direct: into device memory by the data plane; indirect: the software path, M3)', labels: { path: 'direct' } },
  { key: 'indirectSegments', name: 'sabre_placed_segments_total', kind: 'counter', help: '', labels: { path: 'indirect' } },
  { key: 'directBytes', name: 'sabre_placed_bytes_total', kind: 'counter', help: 'payload bytes placed, by path', labels: { path: 'direct' } },
  { key: 'indirectBytes', name: 'sabre_placed_bytes_total', kind: 'counter', help: '', labels: { path: 'indirect' } },
  { key: 'placeBatches', name: 'sabre_place_batches_total', kind: 'counter', help: 'placement batches handed to the data plane' },
  { key: 'drops', name: 'sabre_engine_drops_total', kind: 'counter', help: 'frames the RDMAP engine dropped (failed checks against local state)' },
  { key: 'duplicates', name: 'sabre_engine_duplicates_total', kind: 'counter', help: 'duplicate frames the engine recognised and discarded' },
  { key: 'terminatesSent', name: 'sabre_terminates_total', kind: 'counter', help: 'RDMAP Terminate messages, by direction', labels: { direction: 'sent' } },
  { key: 'terminatesReceived', name: 'sabre_terminates_total', kind: 'counter', help: '', labels: { direction: 'received' } },
  { key: 'rnrNaksSent', name: 'sabre_rnr_naks_sent_total', kind: 'counter', help: 'receiver-not-ready answers sent (a message found no posted receive)' },
  { key: 'notReadySent', name: 'sabre_not_ready_sent_total', kind: 'counter', help: 'device-wide not-ready words sent while the device held its input (one per peer end each 500 ms)' },
  { key: 'notReadyRefused', name: 'sabre_not_ready_refused_total', kind: 'counter', help: 'not-ready words ignored: their source is no peer end this device has a flow to' },
  { key: 'notReadyEvicted', name: 'sabre_not_ready_evicted_total', kind: 'counter', help: 'peer ends forgotten as holding their input past the bound of 4096, least recently heard first' },
  { key: 'regionsKept', name: 'sabre_regions_kept_total', kind: 'counter', help: 'deregistered regions whose memory was kept for good: views of it stayed in the system send queue past the fence' },
  { key: 'rnrRetries', name: 'sabre_rnr_retries_total', kind: 'counter', help: 'messages resent after a receiver-not-ready answer' },
  { key: 'timeouts', name: 'sabre_engine_timeouts_total', kind: 'counter', help: 'work requests that timed out waiting for the peer' },
  { key: 'stagedBytes', name: 'sabre_staged_bytes', kind: 'gauge', help: 'bytes held in staging buffers for the indirect path' },
];

/** dev.stats().memory (the shared WebAssembly.Memory of the device). */
export const MEMORY_STATS: readonly StatMetric[] = [
  { key: 'used', name: 'sabre_device_memory_bytes', kind: 'gauge', help: 'device memory, by state', labels: { state: 'used' } },
  { key: 'free', name: 'sabre_device_memory_bytes', kind: 'gauge', help: '', labels: { state: 'free' } },
  { key: 'capacity', name: 'sabre_device_memory_bytes', kind: 'gauge', help: '', labels: { state: 'capacity' } },
  { key: 'largestFree', name: 'sabre_device_memory_largest_free_bytes', kind: 'gauge', help: 'largest free block of device memory (fragmentation)' },
  { key: 'grows', name: 'sabre_device_memory_grows_total', kind: 'counter', help: 'times the device memory grew' },
];

/** dev.stats().link: udp (sabre's reliability layer) and tcp (MPA) transport counters. */
export const LINK_STATS: readonly StatMetric[] = [
  { key: 'rxDatagrams', name: 'sabre_link_datagrams_total', kind: 'counter', help: 'udp datagrams, by direction', labels: { direction: 'rx' } },
  { key: 'txDatagrams', name: 'sabre_link_datagrams_total', kind: 'counter', help: '', labels: { direction: 'tx' } },
  { key: 'badCrc', name: 'sabre_crc_failures_total', kind: 'counter', help: 'datagrams whose CRC32C trailer did not match, by where it was checked', labels: { stage: 'inline' } },
  { key: 'rxOffloadedBadCrc', name: 'sabre_crc_failures_total', kind: 'counter', help: '', labels: { stage: 'worker' } },
  drop('truncated', 'truncated'),
  drop('oversized', 'oversized'),
  drop('malformed', 'malformed'),
  drop('unknownContext', 'unknown_context'),
  drop('stale', 'stale'),
  drop('badFrames', 'bad_frame'),
  drop('undeliverable', 'undeliverable'),
  drop('rxAreaFull', 'rx_area_full'),
  drop('dropped', 'dropped'),
  drop('streamFaults', 'stream_fault'),
  { key: 'linkFailures', name: 'sabre_link_failures_total', kind: 'counter', help: 'peers given up for good (udp: past the retry limit)' },
  { key: 'contexts', name: 'sabre_transport_contexts', kind: 'gauge', help: 'udp transport contexts (one per peer, M5)' },
  { key: 'contextsReclaimed', name: 'sabre_transport_contexts_reclaimed_total', kind: 'counter', help: 'idle transport contexts reclaimed' },
  { key: 'unownedReclaimed', name: 'sabre_transport_contexts_unowned_reclaimed_total', kind: 'counter', help: 'udp: transport contexts no QP owned, taken for a newcomer while their peer kept sending' },
  { key: 'contextsFailed', name: 'sabre_transport_contexts_failed_total', kind: 'counter', help: 'transport contexts that failed' },
  { key: 'frames', name: 'sabre_link_frames_total', kind: 'counter', help: 'engine frames, by direction', labels: { direction: 'rx' } },
  { key: 'txFrames', name: 'sabre_link_frames_total', kind: 'counter', help: '', labels: { direction: 'tx' } },
  { key: 'segmentsIn', name: 'sabre_link_segments_total', kind: 'counter', help: 'tcp: DDP segments (FPDUs), by direction', labels: { direction: 'rx' } },
  { key: 'segmentsOut', name: 'sabre_link_segments_total', kind: 'counter', help: '', labels: { direction: 'tx' } },
  { key: 'controlIn', name: 'sabre_link_control_total', kind: 'counter', help: 'tcp: sabre control messages, by direction', labels: { direction: 'rx' } },
  { key: 'controlOut', name: 'sabre_link_control_total', kind: 'counter', help: '', labels: { direction: 'tx' } },
  { key: 'connections', name: 'sabre_link_connections', kind: 'gauge', help: 'tcp: MPA connections open' },
  { key: 'rxOffloaded', name: 'sabre_offloaded_total', kind: 'counter', help: 'udp: datagrams whose CRC32C ran on a data-plane worker, by direction', labels: { direction: 'rx' } },
  { key: 'txOffloaded', name: 'sabre_offloaded_total', kind: 'counter', help: '', labels: { direction: 'tx' } },
  { key: 'offloadFailures', name: 'sabre_offload_failures_total', kind: 'counter', help: 'udp: worker batches that failed (done inline instead)' },
  // udp transport contexts, summed over every context the device had (live and dropped).
  drop('rxDuplicate', 'duplicate'),
  drop('rxOutOfWindow', 'out_of_window'),
  drop('rxNoCredit', 'no_credit'),
  { key: 'retransmits', name: 'sabre_retransmits_total', kind: 'counter', help: 'udp: DATA datagrams sent again (after an RTO, a fast retransmit or a tail-loss probe)' },
  { key: 'fastRetransmits', name: 'sabre_fast_retransmits_total', kind: 'counter', help: 'udp: datagrams SACK showed lost, resent before the RTO' },
  { key: 'tailLossProbes', name: 'sabre_tail_loss_probes_total', kind: 'counter', help: 'udp: tail-loss probes (the oldest unacknowledged datagram resent after ~2 RTTs without an ACK)' },
  { key: 'rtoExpiries', name: 'sabre_rto_expiries_total', kind: 'counter', help: 'udp: retransmission timeouts (window collapsed, everything outstanding resent)' },
  { key: 'keepalives', name: 'sabre_keepalives_total', kind: 'counter', help: 'udp: keepalive probes of idle peers, by direction (sent; answered: the peer\'s probes answered)', labels: { direction: 'sent' } },
  { key: 'keepaliveAnswers', name: 'sabre_keepalives_total', kind: 'counter', help: '', labels: { direction: 'answered' } },
];

export interface ContextMetric {
  /** Key in a dev.stats().linkContexts row (src/core/link.ts TransportContextStats). */
  readonly key: keyof TransportContextStats;
  readonly name: string;
  readonly kind: Kind;
  readonly help: string;
  /** Multiplier into the metric's unit (microseconds to seconds). */
  readonly scale?: number;
  readonly labels?: Readonly<Record<string, string>>;
}

/** dev.stats().linkContexts: one series per peer (label `peer`, host:port), at most LINK_CONTEXTS_SHOWN per device. */
export const CONTEXT_STATS: readonly ContextMetric[] = [
  { key: 'retransmits', name: 'sabre_context_retransmits_total', kind: 'counter', help: 'udp transport context: DATA datagrams sent again, per peer' },
  { key: 'fastRetransmits', name: 'sabre_context_fast_retransmits_total', kind: 'counter', help: 'udp transport context: datagrams SACK showed lost, per peer' },
  { key: 'rtoExpiries', name: 'sabre_context_rto_expiries_total', kind: 'counter', help: 'udp transport context: retransmission timeouts, per peer' },
  { key: 'tailLossProbes', name: 'sabre_context_tail_loss_probes_total', kind: 'counter', help: 'udp transport context: tail-loss probes, per peer' },
  { key: 'keepalives', name: 'sabre_context_keepalives_total', kind: 'counter', help: 'udp transport context: keepalive probes sent, per peer' },
  { key: 'txData', name: 'sabre_context_data_datagrams_total', kind: 'counter', help: 'udp transport context: DATA datagrams (first transmissions), by direction, per peer', labels: { direction: 'tx' } },
  { key: 'rxData', name: 'sabre_context_data_datagrams_total', kind: 'counter', help: '', labels: { direction: 'rx' } },
  { key: 'srttUs', name: 'sabre_context_srtt_seconds', kind: 'gauge', help: 'udp transport context: smoothed round-trip time (0 before the first sample)', scale: 1e-6 },
  { key: 'rtoUs', name: 'sabre_context_rto_seconds', kind: 'gauge', help: 'udp transport context: retransmission timeout', scale: 1e-6 },
  { key: 'cwnd', name: 'sabre_context_cwnd_datagrams', kind: 'gauge', help: 'udp transport context: congestion window' },
  { key: 'inFlight', name: 'sabre_context_in_flight_datagrams', kind: 'gauge', help: 'udp transport context: datagrams sent and not yet acknowledged' },
  { key: 'peerWindow', name: 'sabre_context_peer_window_datagrams', kind: 'gauge', help: 'udp transport context: receive window the peer advertises' },
  { key: 'rxPending', name: 'sabre_context_rx_pending_datagrams', kind: 'gauge', help: 'udp transport context: delivered datagrams the engine has not released yet (receive credit in use)' },
];

export type Labels = Record<string, string>;

interface DeviceEntry {
  dev: Device;
  labels: Labels;
  pds: Set<ProtectionDomain>;
  cqs: Map<CompletionQueue, string>;
}

interface Source {
  kind: string;
  instance: string;
  stats: () => Record<string, unknown>;
}

/** Numeric leaves of a stats object, nested keys joined with '_'. */
function numericLeaves(o: Record<string, unknown>, prefix = '', out: [string, number][] = []): [string, number][] {
  for (const [k, v] of Object.entries(o)) {
    const key = prefix ? `${prefix}_${k}` : k;
    if (typeof v === 'number' && Number.isFinite(v)) out.push([key, v]);
    else if (typeof v === 'bigint') out.push([key, Number(v)]);
    else if (typeof v === 'boolean') out.push([key, v ? 1 : 0]);
    else if (v && typeof v === 'object' && !Array.isArray(v)) numericLeaves(v as Record<string, unknown>, key, out);
  }
  return out;
}

export interface SabreMetricsOptions {
  registry?: Registry;
  /** prom-client's process metrics (CPU, memory, event-loop lag, GC): default true. */
  defaultMetrics?: boolean;
}

export class SabreMetrics {
  readonly registry: Registry;
  readonly #devices = new Map<Device, DeviceEntry>();
  readonly #sources = new Set<Source>();
  readonly #sourceGauges = new Map<string, Gauge<string>>();
  #nextDevice = 0;
  readonly #completions: Counter<string>;
  readonly #completionBytes: Histogram<string>;
  readonly #latency: Histogram<string>;
  readonly #bandwidth: Gauge<string>;

  constructor(opts: SabreMetricsOptions = {}) {
    this.registry = opts.registry ?? new RegistryClass();
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    const reg = [this.registry];
    const devLabels = ['device', 'transport'];
    const self = this;
    // The stats tables: one metric per distinct name, filled from every device at scrape time.
    const byName = new Map<string, { kind: Kind; help: string; extra: Set<string> }>();
    for (const m of [...DEVICE_STATS, ...MEMORY_STATS, ...LINK_STATS]) {
      const e = byName.get(m.name) ?? { kind: m.kind, help: m.help, extra: new Set<string>() };
      if (!e.help) e.help = m.help;
      for (const l of Object.keys(m.labels ?? {})) e.extra.add(l);
      byName.set(m.name, e);
    }
    for (const [name, e] of byName) {
      const labelNames = [...devLabels, ...e.extra];
      const fill = (metric: { set?(l: Labels, v: number): void; inc?(l: Labels, v: number): void; reset(): void }) => {
        metric.reset();
        for (const d of self.#devices.values()) {
          const st = d.dev.stats() as unknown as Record<string, unknown> & { memory?: Record<string, number>; link?: Record<string, number> };
          const rows: [readonly StatMetric[], Record<string, unknown> | undefined][] = [[DEVICE_STATS, st], [MEMORY_STATS, st.memory], [LINK_STATS, st.link]];
          for (const [table, values] of rows) {
            if (!values) continue;
            for (const m of table) {
              if (m.name !== name) continue;
              const v = values[m.key];
              if (typeof v !== 'number') continue;
              const labels = { ...d.labels, ...m.labels };
              if (e.kind === 'counter') metric.inc!(labels, v);
              else metric.set!(labels, v);
            }
          }
        }
      };
      if (e.kind === 'counter') new CounterClass({ name, help: e.help, labelNames, registers: reg, collect() { fill(this as never); } });
      else new GaugeClass({ name, help: e.help, labelNames, registers: reg, collect() { fill(this as never); } });
    }
    // One series per transport context (peer), read from dev.stats().linkContexts.
    const ctxByName = new Map<string, { kind: Kind; help: string; extra: Set<string> }>();
    for (const m of CONTEXT_STATS) {
      const e = ctxByName.get(m.name) ?? { kind: m.kind, help: m.help, extra: new Set<string>() };
      if (!e.help) e.help = m.help;
      for (const l of Object.keys(m.labels ?? {})) e.extra.add(l);
      ctxByName.set(m.name, e);
    }
    for (const [name, e] of ctxByName) {
      const fill = (metric: { set?(l: Labels, v: number): void; inc?(l: Labels, v: number): void; reset(): void }) => {
        metric.reset();
        for (const d of self.#devices.values()) {
          const rows = d.dev.stats().linkContexts;
          if (!rows) continue;
          for (const row of rows) {
            for (const m of CONTEXT_STATS) {
              if (m.name !== name) continue;
              const v = row[m.key];
              if (typeof v !== 'number') continue;
              const labels = { ...d.labels, peer: row.peer, ...m.labels };
              if (e.kind === 'counter') metric.inc!(labels, v);
              else metric.set!(labels, v * (m.scale ?? 1));
            }
          }
        }
      };
      const labelNames = [...devLabels, 'peer', ...e.extra];
      if (e.kind === 'counter') new CounterClass({ name, help: e.help, labelNames, registers: reg, collect() { fill(this as never); } });
      else new GaugeClass({ name, help: e.help, labelNames, registers: reg, collect() { fill(this as never); } });
    }
    // Keys no table names: exported generically, so nothing the engine counts goes missing.
    const known = (table: readonly StatMetric[]) => new Set(table.map((m) => m.key));
    const knownDevice = known(DEVICE_STATS);
    const knownLink = known(LINK_STATS);
    new GaugeClass({
      name: 'sabre_device_stat', help: 'dev.stats() values without a named metric', labelNames: [...devLabels, 'stat'], registers: reg,
      collect() {
        this.reset();
        for (const d of self.#devices.values()) {
          const { memory: _m, link: _l, linkContexts: _c, ...rest } = d.dev.stats() as unknown as Record<string, unknown>;
          for (const [k, v] of numericLeaves(rest)) if (!knownDevice.has(k)) this.set({ ...d.labels, stat: k }, v);
        }
      },
    });
    new GaugeClass({
      name: 'sabre_link_stat', help: 'dev.stats().link values without a named metric', labelNames: [...devLabels, 'stat'], registers: reg,
      collect() {
        this.reset();
        for (const d of self.#devices.values()) {
          const link = (d.dev.stats() as { link?: Record<string, unknown> }).link;
          if (link) for (const [k, v] of numericLeaves(link)) if (!knownLink.has(k)) this.set({ ...d.labels, stat: k }, v);
        }
      },
    });
    new GaugeClass({
      name: 'sabre_device_mtu_bytes', help: 'udp: largest datagram; tcp: the MULPDU', labelNames: devLabels, registers: reg,
      collect() {
        this.reset();
        for (const d of self.#devices.values()) if (d.dev.mtu !== undefined) this.set(d.labels, d.dev.mtu);
      },
    });
    new GaugeClass({
      name: 'sabre_qp_state', help: 'state of each QP (0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 SQD, 5 SQE, 6 ERROR as in verbs)', labelNames: [...devLabels, 'qpn', 'type', 'state'], registers: reg,
      collect() {
        this.reset();
        for (const d of self.#devices.values()) for (const pd of d.pds) for (const qp of pd.qps) this.set({ ...d.labels, qpn: String(qp.qpn), type: qp.type, state: qpStateName(qp.state) ?? String(qp.state) }, qp.state);
      },
    });
    new GaugeClass({
      name: 'sabre_qps', help: 'QPs, by type and state', labelNames: [...devLabels, 'type', 'state'], registers: reg,
      collect() {
        this.reset();
        for (const d of self.#devices.values()) for (const pd of d.pds) for (const qp of pd.qps) this.inc({ ...d.labels, type: qp.type, state: qpStateName(qp.state) ?? String(qp.state) }, 1);
      },
    });
    new GaugeClass({
      name: 'sabre_memory_regions', help: 'registered memory regions', labelNames: devLabels, registers: reg,
      collect() {
        this.reset();
        for (const d of self.#devices.values()) {
          let n = 0;
          for (const pd of d.pds) n += pd.mrs.size;
          this.set(d.labels, n);
        }
      },
    });
    const cqGauge = (name: string, help: string, get: (cq: CompletionQueue) => number) =>
      new GaugeClass({
        name, help, labelNames: [...devLabels, 'cq'], registers: reg,
        collect() {
          this.reset();
          for (const d of self.#devices.values()) for (const [cq, id] of d.cqs) this.set({ ...d.labels, cq: id }, get(cq));
        },
      });
    cqGauge('sabre_cq_entries', 'completions waiting to be polled', (cq) => cq.count);
    cqGauge('sabre_cq_depth', 'CQ capacity', (cq) => cq.depth);
    cqGauge('sabre_cq_overrun', '1 once a completion found the CQ full', (cq) => (cq.overrun ? 1 : 0));
    cqGauge('sabre_cq_dropped', 'completions lost to an overrun', (cq) => cq.dropped);
    this.#completions = new CounterClass({ name: 'sabre_completions_total', help: 'work completions reaped (by code that reports them: countCompletions)', labelNames: [...devLabels, 'opcode', 'status'], registers: reg });
    this.#completionBytes = new HistogramClass({
      name: 'sabre_completion_bytes', help: 'byteLen of successful work completions', labelNames: [...devLabels, 'opcode'], registers: reg,
      buckets: [64, 512, 4096, 16384, 65536, 262144, 1048576, 8388608],
    });
    this.#latency = new HistogramClass({
      name: 'sabre_op_latency_seconds', help: 'operation latency as measured by the caller (sabre perf: per iteration, half round trip for ping-pongs)', labelNames: ['op', 'transport', 'source'], registers: reg,
      buckets: [5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 0.1],
    });
    this.#bandwidth = new GaugeClass({ name: 'sabre_perf_bandwidth_bytes_per_second', help: 'last sabre perf bandwidth result (average), by test, size and source', labelNames: ['test', 'transport', 'size', 'source'], registers: reg });
  }

  /** Export `dev` (its stats, link counters, memory); returns the device label it got. */
  addDevice(dev: Device, name?: string): string {
    const existing = this.#devices.get(dev);
    if (existing) return existing.labels.device!;
    const label = name ?? `sabre${this.#nextDevice++}`;
    this.#devices.set(dev, { dev, labels: { device: label, transport: (dev.address as { transport?: string }).transport ?? 'inproc' }, pds: new Set(), cqs: new Map() });
    return label;
  }

  removeDevice(dev: Device): void {
    this.#devices.delete(dev);
  }

  /** Export the QPs and regions of `pd` (read live from pd.qps / pd.mrs at each scrape). */
  addPd(pd: ProtectionDomain): void {
    this.#entry(pd.device).pds.add(pd);
  }

  addCq(dev: Device, cq: CompletionQueue, name?: string): void {
    const e = this.#entry(dev);
    e.cqs.set(cq, name ?? `cq${e.cqs.size}`);
  }

  #entry(dev: Device): DeviceEntry {
    this.addDevice(dev);
    return this.#devices.get(dev)!;
  }

  /**
   * The registration hook for features above verbs (channels, the file service): every numeric
   * leaf of `stats()` becomes sabre_<kind>_stat{instance, stat}. Returns the unregister call.
   */
  addSource(kind: string, instance: string, stats: () => Record<string, unknown>): () => void {
    if (!/^[a-z][a-z0-9_]*$/.test(kind)) throw new Error(`metrics source kind must be snake_case, got '${kind}'`);
    if (!this.#sourceGauges.has(kind)) {
      const self = this;
      this.#sourceGauges.set(
        kind,
        new GaugeClass({
          name: `sabre_${kind}_stat`, help: `${kind} stats() values`, labelNames: ['instance', 'stat'], registers: [this.registry],
          collect() {
            this.reset();
            for (const s of self.#sources) if (s.kind === kind) for (const [k, v] of numericLeaves(s.stats())) this.set({ instance: s.instance, stat: k }, v);
          },
        }),
      );
    }
    const src: Source = { kind, instance, stats };
    this.#sources.add(src);
    return () => void this.#sources.delete(src);
  }

  /** Count reaped completions (callers that poll pass what they got). */
  countCompletions(dev: Device, wcs: readonly { status: number; opcode: number; byteLen: number }[]): void {
    const d = this.#devices.get(dev);
    if (!d) return;
    for (const wc of wcs) {
      const opcode = wcOpcodeName(wc.opcode as never) ?? String(wc.opcode);
      this.#completions.inc({ ...d.labels, opcode, status: wcStatusName(wc.status as never) ?? String(wc.status) });
      if (wc.status === 0) this.#completionBytes.observe({ ...d.labels, opcode }, wc.byteLen);
    }
  }

  observeLatency(labels: { op: string; transport: string; source: string }, seconds: number): void {
    this.#latency.observe(labels, seconds);
  }

  setBandwidth(labels: { test: string; transport: string; size: string; source: string }, bytesPerSecond: number): void {
    this.#bandwidth.set(labels, bytesPerSecond);
  }

  /** The registry in Prometheus' text format; devices closed since the last scrape leave it first (their stats are gone). */
  metrics(): Promise<string> {
    for (const dev of this.#devices.keys()) if (dev.closed) this.#devices.delete(dev);
    return this.registry.metrics();
  }
}
