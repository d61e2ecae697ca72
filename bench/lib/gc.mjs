// A forced, settled garbage collection for the memory benches: gc() whether or not node was
// started with --expose-gc (the flag is set at run time), run four times a turn apart so
// finalizers and the external memory they free have landed before a reading is taken.
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
export const gc = globalThis.gc ?? vm.runInNewContext('gc');

export async function settle() {
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
}
