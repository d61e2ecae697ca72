// The code of the SabreError `f` throws (undefined: it did not throw), for tests that check
// which error a call raises without stopping at the first.
import { SabreError } from '../../src/core/errors.js';

export const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return e instanceof SabreError ? e.code : 'not a SabreError';
  }
  return undefined;
};
