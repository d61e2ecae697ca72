// Message channels (M2): eager writes into small pre-registered slots, multi-phase enlargement
// of those slots with numbered epochs, shrink after idle, rendezvous reads above the largest
// slot. docs/channels.md tells how; docs/wire.md has the bytes.
import type { Device } from '../verbs/device.js';
import { existingHub, type ChannelTotals } from './hub.js';

export { Channel, type ChannelStats } from './channel.js';
export { ChannelListener, connectChannel, listenChannels, type ChannelConnectOptions, type ChannelListenOptions, type PreauthOptions } from './listen.js';
export { DEFAULT_LADDER, type ChannelOptions, type DedupStoreOptions, type Phase } from './options.js';
export type { ChannelTotals } from './hub.js';

const NONE: ChannelTotals = {
  channels: 0, opened: 0, closed: 0, failed: 0, registeredBytes: 0, enlargements: 0, shrinks: 0, messagesSent: 0, messagesReceived: 0, refused: 0,
  limitRefusals: 0, rendezvousWaits: 0, rendezvousReadTimeouts: 0, helloEvicted: 0, acceptRefused: 0, peers: 0, untrusted: 0, rendezvousHeldBytes: 0, peerCapRefused: 0,
};

/** The channels of a device: how many, the memory they hold now, and their totals (for dev.stats()). */
export function channelStats(dev: Device): ChannelTotals {
  return existingHub(dev)?.stats() ?? { ...NONE };
}
