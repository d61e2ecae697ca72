// The version `sabre -V` prints: package.json's, read from beside dist/ (or src/) so it is the
// installed package's own.
import { readFileSync } from 'node:fs';

let cached: string | undefined;

export function sabreVersion(): string {
  if (cached === undefined) {
    try {
      cached = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      cached = 'unknown';
    }
  }
  return cached;
}

export function versionLine(): string {
  return `sabre ${sabreVersion()} (node ${process.versions.node})`;
}
