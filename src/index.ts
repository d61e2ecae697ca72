// The public API (DESIGN §4): re-exports only.
export { openDevice, Device } from './verbs/device.js';
export { Access, Opcode, WcOpcode, WcStatus, QpState, wcStatusName, wcOpcodeName, qpStateName } from './core/enums.js';
export type { OpcodeValue, WcOpcodeValue, WcStatusValue, QpStateValue } from './core/enums.js';
export { ProtectionDomain } from './verbs/pd.js';
export { MemoryRegion } from './verbs/mr.js';
export { CompletionQueue } from './verbs/cq.js';
export { QueuePair } from './verbs/qp.js';
export { AddressHandle } from './verbs/ah.js';
export type { WrId, Sge, RemoteSge, WorkCompletion } from './core/work.js';
export type { SendWr, RecvWr, OpenDeviceOptions, DeviceLimits, CqInit, QpInit, ConnectInit, AhInit, DeviceAddress } from './verbs/types.js';
export type { DeviceCounters } from './rdmap/memory.js';
export { SabreError, ErrorCode } from './core/errors.js';
export { WorkRequestError } from './verbs/wc.js';
export type { DeviceEvent, DeviceEventType, EventStream } from './verbs/events.js';
export type { ErrorCodeValue } from './core/errors.js';
export { createInprocBridge, joinInprocBridge, InprocBridge } from './transport/inproc/bridge.js';
export type { BridgeInit } from './transport/inproc/bridge.js';
export { listen, connect, connectionInfo, defaultPd, CmListener, type CmListenerCounters } from './cm/index.js';
export type { CmQpOptions, CmListenOptions, CmConnectOptions, CmConnectionInfo } from './cm/index.js';
export {
  listenChannels, connectChannel, channelStats, Channel, ChannelListener, DEFAULT_LADDER,
} from './channel/index.js';
export type { ChannelOptions, ChannelListenOptions, ChannelConnectOptions, ChannelStats, ChannelTotals, DedupStoreOptions, Phase, PreauthOptions } from './channel/index.js';
export { serveFiles, FileServer, FileClient, FileError, createRemoteReadStream, createRemoteWriteStream } from './files/index.js';
export type { ServeOptions, FileServerStats, Provider, ConnectOptions, OpenOptions, RemoteFile, OpOptions, TransferResult, DirEntry, NegotiatedLimits, ServerLimits } from './files/index.js';
// Types the public API refers to (a member's or an option's type), so that a consumer can name
// them and the API reference (npm run docs) documents them; types only, nothing new at run time.
// Internal types that public classes carry (a hub member, a jail, a session table…) are listed
// in typedoc.json's intentionallyNotExported instead.
export type { DeviceStats } from './verbs/device.js';
export type { NicCounters } from './nic/port.js';
export type { AllocatorStats } from './dataplane/allocator.js';
export type { QpDownCause, TransportContextStats } from './core/link.js';
export type { QpCaps } from './rdmap/state.js';
export type { SendOptions } from './channel/channel.js';
export type { CoreState as ChannelState } from './channel/core.js';
export type { ServerCounters } from './files/server-core.js';
export type { ClientCounters } from './files/client-core.js';
export type { PipeCounters } from './files/pipe.js';
export type { SessionLimits } from './files/sessions.js';
export type { DedupTransferStats, DedupCounters } from './files/dedup.js';
export type { BackoffLimits } from './files/admission.js';
export type { RemoteReadStreamOptions, RemoteWriteStreamOptions } from './files/streams.js';
export type { UdpAddress, TcpAddress, InprocAddress, TransportAddress } from './core/address.js';
