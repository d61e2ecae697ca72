// The udp provider: sabre's reliable datagram transport (M5). Segments are cut so envelope +
// DDP header + payload fill one datagram of the path MTU. (openDevice's `workers` are NIC
// threads, not the data-plane workers a UdpLink can be opened with: it starts none of those.)
import { checkIntegrityMode, INTEGRITY_MODES } from '../transport/udp/integrity.js';
import { UdpLink } from '../transport/udp/link.js';
import { bindError, checkHostPort, type TransportProvider } from './provider.js';

export const udpProvider: TransportProvider = {
  name: 'udp',
  integrityModes: INTEGRITY_MODES,
  threaded: true,
  limits: ['maxContexts', 'maxContextsPerHost', 'unownedContextMs'],
  checkOptions: (opts) => {
    checkHostPort(opts);
    if (opts.integrity !== undefined) checkIntegrityMode(opts.integrity, INTEGRITY_MODES);
  },
  open: async (mem, opts, limits) => {
    try {
      const link = await UdpLink.open({
        host: opts.host ?? '127.0.0.1',
        port: opts.port ?? 0,
        deviceMemory: mem,
        ...(opts.mtu !== undefined ? { mtu: opts.mtu } : {}),
        ...(opts.sockets !== undefined ? { sockets: opts.sockets } : {}),
        ...(opts.integrity !== undefined ? { integrity: opts.integrity } : {}),
        ...(opts.keepaliveMs !== undefined ? { context: { keepaliveMs: opts.keepaliveMs } } : {}),
        ...limits,
      });
      return { link };
    } catch (e) {
      throw bindError(e, 'udp', opts.host ?? '127.0.0.1', opts.port ?? 0);
    }
  },
};
