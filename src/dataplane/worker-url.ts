// Worker threads must load compiled JavaScript. Under vitest this module runs from
// src/dataplane/*.ts, where there is no .js sibling, so point at the dist/ build of the same
// file (the test global setup keeps dist/ fresh).
import { fileURLToPath } from 'node:url';

export function workerScript(name: string): string {
  const here = new URL(import.meta.url);
  const url = here.pathname.endsWith('.ts') ? new URL(`../../dist/dataplane/${name}`, here) : new URL(`./${name}`, here);
  return fileURLToPath(url);
}
