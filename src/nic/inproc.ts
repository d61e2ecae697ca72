// The inproc provider: devices of one process (and, through the bridge, of its worker threads)
// hand frames to each other by reference. No wire: no integrity, no socket options, no limits.
import { InprocLink } from '../transport/inproc/fabric.js';
import type { TransportProvider } from './provider.js';

export const inprocProvider: TransportProvider = {
  name: 'inproc',
  threaded: false,
  limits: [],
  checkOptions: () => {},
  // Segments as large as the device allows: 64 KiB unless openDevice asked otherwise.
  open: async (_mem, opts) => ({ link: new InprocLink(), mss: opts.mss ?? 65536 }),
};
