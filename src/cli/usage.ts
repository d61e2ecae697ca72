// A usage error is one clear line on stderr and exit status 2, as well-made CLIs do.
export class UsageError extends Error {
  override name = 'UsageError';
}

export function intOption(name: string, v: string | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (!/^(0x[0-9a-f]+|\d+)$/i.test(v)) throw new UsageError(`${name} must be an integer, got '${v}'`);
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`${name} must be between ${min} and ${max}, got ${v}`);
  return n;
}

export function numOption(name: string, v: string | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`${name} must be a number between ${min} and ${max}, got '${v}'`);
  return n;
}

export function choice<T extends string>(name: string, v: string | undefined, allowed: readonly T[]): T | undefined {
  if (v === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw new UsageError(`${name} must be one of ${allowed.join('|')}, got '${v}'`);
  return v as T;
}
