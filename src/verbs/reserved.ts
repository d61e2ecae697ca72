// QP numbers the device keeps for itself.

/**
 * The QPN of a device's connection-manager QP (ProtectionDomain.createCmQp, src/cm/agent.ts):
 * user QPNs are drawn below 2^24 (./qpn.ts) and never get there (InfiniBand keeps QP1 for its CM the same way;
 * QPN 0 is not used because the udp link treats it as invalid).
 */
// (Defined with the routing rule, which keeps this QP on a device's first NIC thread.)
export { CM_QPN } from '../core/peer-route.js';
