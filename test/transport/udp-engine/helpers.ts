// The two-process helpers (../peer/helpers.ts) bound to udp.
import { openLocal as open, startPeer as start, type Peer } from '../peer/helpers.js';

export * from '../peer/helpers.js';

export const startPeer = (opts: Parameters<typeof start>[1] = {}): Promise<Peer> => start('udp', opts);
export const openLocal = (opts: Parameters<typeof open>[1] = {}) => open('udp', opts);
