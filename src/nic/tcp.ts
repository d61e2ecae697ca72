// The tcp provider: iWARP, one MPA connection per rc QP pair; segments fit one FPDU of the
// MULPDU. MPA's only integrity is its CRC, asked for unless integrity 'none' and on when either
// side asks (RFC 5044 §7.1).
import { TcpLink } from '../transport/tcp/link.js';
import { MPA_DEFAULT_IRD } from '../transport/tcp/mpa-handshake.js';
import { checkIntegrityMode } from '../transport/udp/integrity.js';
import { bindError, checkHostPort, type TransportProvider } from './provider.js';

const TCP_INTEGRITY = ['crc32c', 'none'] as const;

export const tcpProvider: TransportProvider = {
  name: 'tcp',
  integrityModes: TCP_INTEGRITY,
  threaded: true,
  limits: ['maxConnections', 'maxConnectionsPerHost', 'handshakeTimeoutMs', 'maxQueuedBytes'],
  checkOptions: (opts) => {
    checkHostPort(opts);
    if (opts.integrity !== undefined) checkIntegrityMode(opts.integrity, TCP_INTEGRITY);
  },
  open: async (mem, opts, limits, engine) => {
    const host = opts.host ?? '127.0.0.1';
    // The IRD MPA offers the peer is no more than the engine holds it to (limits.maxIrd): a
    // conforming peer then never meets the engine's Terminate for too many reads.
    const maxIrd = engine?.maxIrd;
    const mpa = { crc: opts.integrity !== 'none', ...(maxIrd !== undefined ? { ird: Math.min(MPA_DEFAULT_IRD, maxIrd) } : {}) };
    const link = await TcpLink.open({ dp: mem, host, port: opts.port ?? 0, connection: { mpa }, ...limits }).catch((e: unknown) => {
      throw bindError(e, 'tcp', host, opts.port ?? 0);
    });
    return { link };
  },
};
