// The udp provider: sabre's reliable datagram transport (M5). Segments are cut so envelope +
// DDP header + payload fill one datagram of the path MTU; the data-plane workers, when asked
// for, check and compute the CRC32C of large datagrams.
import { DataPlaneWorkers } from '../dataplane/workers.js';
import { checkIntegrityMode, INTEGRITY_MODES } from '../transport/udp/integrity.js';
import { UdpLink } from '../transport/udp/link.js';
import { bindError, checkHostPort, type TransportProvider } from './provider.js';

export const udpProvider: TransportProvider = {
  name: 'udp',
  integrityModes: INTEGRITY_MODES,
  threaded: true,
  limits: ['maxContexts', 'maxContextsPerHost'],
  checkOptions: (opts) => {
    checkHostPort(opts);
    if (opts.integrity !== undefined) checkIntegrityMode(opts.integrity, INTEGRITY_MODES);
  },
  dataPlaneWorkers: (workers) => workers,
  open: async (mem, opts, limits) => {
    const workers = opts.workers ?? 0;
    const dp = workers > 0 ? await DataPlaneWorkers.start(mem, workers) : undefined;
    try {
      const link = await UdpLink.open({
        host: opts.host ?? '127.0.0.1',
        port: opts.port ?? 0,
        deviceMemory: mem,
        ...(dp ? { workers: dp } : {}),
        ...(opts.mtu !== undefined ? { mtu: opts.mtu } : {}),
        ...(opts.sockets !== undefined ? { sockets: opts.sockets } : {}),
        ...(opts.integrity !== undefined ? { integrity: opts.integrity } : {}),
        ...(opts.keepaliveMs !== undefined ? { context: { keepaliveMs: opts.keepaliveMs } } : {}),
        ...limits,
      });
      return { link };
    } catch (e) {
      // The link owns the workers once open; before that they are ours to stop.
      await dp?.close();
      throw bindError(e, 'udp', opts.host ?? '127.0.0.1', opts.port ?? 0);
    }
  },
};
