// The file service (M6): an I/O offload protocol over sabre. See docs/files.md.
export { serveFiles, FileServer } from './server.js';
export type { ServeOptions, FileServerStats, Provider } from './server.js';
export { FileClient } from './client.js';
export type { ConnectOptions, OpenOptions, RemoteFile, OpOptions, TransferResult } from './client.js';
export { createRemoteReadStream, createRemoteWriteStream } from './streams.js';
export type { DirEntry } from './dirents.js';
export type { NegotiatedLimits } from './client-core.js';
export type { ServerLimits } from './server-core.js';
export { FileError } from './status.js';
