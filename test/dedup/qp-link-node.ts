// One end of a QpLink pair for the dedup tests: a device, its PD, a CQ of the depth a QpLink
// needs and an rc QP made with qpLinkQpInit. The device is closed by the caller's cleanup list.
import { QP_LINK_CQ_DEPTH, qpLinkQpInit } from '../../src/dedup/qp-link.js';
import { openDevice, type OpenDeviceOptions } from '../../src/index.js';

export async function qpLinkNode(cleanup: Array<() => unknown>, options: OpenDeviceOptions = { transport: 'inproc' }) {
  const d = await openDevice(options);
  cleanup.push(() => d.close());
  const pd = d.allocPd();
  const cq = d.createCq({ depth: QP_LINK_CQ_DEPTH });
  return { d, pd, cq, qp: pd.createQp({ type: 'rc', ...qpLinkQpInit(cq) }) };
}
