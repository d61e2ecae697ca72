// Flags as data: each command declares one table of flags; the same table drives parsing
// (node:util parseArgs underneath), the aliases, and the options section of its --help. A usage
// error is one clear line on stderr and exit status 2, as well-made CLIs do.
import { parseArgs } from 'node:util';

export class UsageError extends Error {
  override name = 'UsageError';
}

export interface Flag {
  /** Canonical long name: the key in the parsed values. */
  readonly name: string;
  readonly short?: string;
  /** Other long spellings accepted for the same flag (perftest's and sabre's). */
  readonly aliases?: readonly string[];
  /** Absent: a boolean switch; present: the flag takes a value, shown as this placeholder. */
  readonly arg?: string;
  readonly help: string;
  /** Left out of --help (accepted for compatibility, documented elsewhere in the help). */
  readonly hidden?: boolean;
}

export type FlagValues = Record<string, string | boolean | undefined>;

/**
 * Parse `argv` against `flags`. Unknown options and missing values become a UsageError that
 * names the command's --help, instead of parseArgs' advice about positionals.
 */
export function parseFlags(command: string, argv: string[], flags: readonly Flag[]): { values: FlagValues; positionals: string[] } {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  const canonical = new Map<string, string>();
  for (const f of flags) {
    for (const n of [f.name, ...(f.aliases ?? [])]) {
      options[n] = { type: f.arg !== undefined ? 'string' : 'boolean', ...(n === f.name && f.short ? { short: f.short } : {}) };
      canonical.set(n, f.name);
    }
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: negativeValuesJoined(argv, options), options, allowPositionals: true, strict: true });
  } catch (e) {
    throw usageFromParseArgs(command, e);
  }
  const values: FlagValues = {};
  for (const [k, v] of Object.entries(parsed.values)) {
    const name = canonical.get(k) ?? k;
    if (values[name] !== undefined && values[name] !== v) throw new UsageError(`--${name} given twice (as --${k})`);
    values[name] = v as string | boolean;
  }
  return { values, positionals: parsed.positionals };
}

/**
 * `-s -5` as `--size=-5`: parseArgs reads a value that starts with '-' as the next option (and
 * says the flag "needs a value"); joined, the value reaches the flag's own check, which says
 * what range it takes.
 */
export function negativeValuesJoined(argv: readonly string[], options: Record<string, { type: 'string' | 'boolean'; short?: string }>): string[] {
  const longOf = new Map<string, string>();
  for (const [name, o] of Object.entries(options)) {
    if (o.type !== 'string') continue;
    longOf.set(`--${name}`, name);
    if (o.short) longOf.set(`-${o.short}`, name);
  }
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const name = longOf.get(a);
    const next = argv[i + 1];
    if (name !== undefined && next !== undefined && /^-\d/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

export function usageFromParseArgs(command: string, e: unknown): Error {
  const err = e as { code?: string; message?: string };
  const hint = `(try 'sabre ${command} --help')`;
  const quoted = /'([^']+)'/.exec(err.message ?? '')?.[1];
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return new UsageError(`unknown option '${quoted}' ${hint}`);
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const name = quoted?.split(/[ ,]+/).find((p) => p.startsWith('--')) ?? quoted;
      return /does not take/.test(err.message ?? '')
        ? new UsageError(`option ${name} takes no value ${hint}`)
        : new UsageError(`option ${name} needs a value ${hint}`);
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return new UsageError(`unexpected argument ${hint}`);
    default:
      return e as Error;
  }
}

/** The options section of a --help text, from the flag table. */
export function flagHelp(flags: readonly Flag[]): string {
  const rows = flags
    .filter((f) => !f.hidden)
    .map((f) => {
      const names = [f.short ? `-${f.short}, --${f.name}` : `    --${f.name}`, ...(f.aliases ?? []).map((a) => `--${a}`)].join(', ');
      return [`  ${names}${f.arg ? ` ${f.arg}` : ''}`, f.help] as const;
    });
  const w = Math.min(40, Math.max(...rows.map(([l]) => l.length)) + 2);
  return rows.map(([l, h]) => (l.length + 1 > w ? `${l}\n${' '.repeat(w)}${h}` : `${l.padEnd(w)}${h}`)).join('\n');
}

export function intOption(name: string, v: string | boolean | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^(0x[0-9a-f]+|\d+)$/i.test(v)) throw new UsageError(`${name} must be an integer, got '${String(v)}'`);
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`${name} must be between ${min} and ${max}, got ${v}`);
  return n;
}

export function numOption(name: string, v: string | boolean | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== 'string' || v.trim() === '' || !Number.isFinite(n) || n < min || n > max) throw new UsageError(`${name} must be a number between ${min} and ${max}, got '${String(v)}'`);
  return n;
}

export function choice<T extends string>(name: string, v: string | boolean | undefined, allowed: readonly T[]): T | undefined {
  if (v === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(v as string)) throw new UsageError(`${name} must be one of ${allowed.join('|')}, got '${String(v)}'`);
  return v as T;
}

export function str(v: string | boolean | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
