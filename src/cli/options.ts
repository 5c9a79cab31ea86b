/**
 * The option tables of the CLI verbs and the one parser they share. Each option is declared once (name,
 * kind, environment variable, default, what its value must be, description); the parser (node:util
 * parseArgs), the `--config <file>` reader, the environment lookup and `--help` all read the same entry.
 * Precedence: flags > environment > config file > defaults. Every value is checked here, before a verb
 * opens any connection; a bad one is an RF_INVALID_OPTIONS error whose message names the option and what
 * it accepts.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { RedfenceError } from '../errors/index.js';

/** A value the parser refused; `tail` follows the option's name in the message. */
export class Invalid {
  constructor(readonly tail: string) {}
}

export interface OptionSpec<V, HasDefault extends boolean = boolean> {
  /** `switch`: a boolean flag (`--x`, turned off by `--no-x`); `value`: takes one value. */
  readonly kind: 'switch' | 'value';
  /** The value's placeholder in the help, e.g. `<ms>`. */
  readonly placeholder: string;
  readonly description: string;
  /** What the value must be, for errors ("an integer >= 1000"). */
  readonly allowed: string;
  /** Environment variable read when the flag is not given (empty counts as unset). */
  readonly env?: string;
  readonly default: HasDefault extends true ? V : V | undefined;
  /** How the help shows a default decided elsewhere (by the processor or the module). */
  readonly defaultText?: string;
  /** Shows a raw value in an error (a URL's password is masked). */
  readonly show?: (raw: string) => string;
  /** The value from its text, or Invalid. */
  readonly parse: (raw: string) => V | Invalid;
  /**
   * The flag may be given more than once: its values reach `parse` one a line (as the environment
   * variable's lines and a config file's array or object do).
   */
  readonly repeat?: true;
}

// biome-ignore lint/suspicious/noExplicitAny: the table holds options of every value type
export type Table = Record<string, OptionSpec<any>>;

/** The parsed values of a table: options with a default always have a value. */
export type Values<T extends Table> = {
  -readonly [K in keyof T]: T[K] extends OptionSpec<infer V, true>
    ? V
    : T[K] extends OptionSpec<infer V>
      ? V | undefined
      : never;
};

export type Source = 'flag' | 'env' | 'config' | 'default';

export interface Parsed<T extends Table> {
  values: Values<T>;
  /** Where each value came from (absent: no value). */
  sources: Partial<Record<keyof T, Source>>;
  positionals: string[];
  help: boolean;
}

interface Common<V> {
  description: string;
  env?: string;
  default?: V;
  defaultText?: string;
}
type WithDefault<O, V> = O extends { default: V } ? true : false;

function spec<V, O extends Common<V>>(
  o: O,
  rest: Omit<OptionSpec<V>, 'description' | 'env' | 'default' | 'defaultText'>,
): OptionSpec<V, WithDefault<O, V>> {
  const common: Common<V> = { description: o.description };
  if (o.env !== undefined) common.env = o.env;
  if (o.default !== undefined) common.default = o.default;
  if (o.defaultText !== undefined) common.defaultText = o.defaultText;
  return { ...rest, ...common } as unknown as OptionSpec<V, WithDefault<O, V>>;
}

const quote = (s: string) => JSON.stringify(s);
const mustBe = (allowed: string, raw: string, show: (s: string) => string = (s) => s) =>
  new Invalid(` must be ${allowed}, got ${quote(show(raw))}`);

/** A boolean switch; from the environment or a config file: true/1 or false/0. Default false. */
export function switchOption(o: Omit<Common<boolean>, 'default'>): OptionSpec<boolean, true> {
  const allowed = 'true, 1, false or 0';
  return {
    kind: 'switch',
    placeholder: '',
    allowed,
    default: false,
    ...o,
    parse: (raw) =>
      raw === 'true' || raw === '1' ? true : raw === 'false' || raw === '0' ? false : mustBe(allowed, raw),
  };
}

/** Free text, optionally checked by `check` (which returns what the value must be when it fails). */
export function textOption<O extends Common<string>>(
  placeholder: string,
  o: O & { allowed?: string; pattern?: RegExp; show?: (raw: string) => string },
): OptionSpec<string, WithDefault<O, string>> {
  const allowed = o.allowed ?? 'a non-empty string';
  return spec(o, {
    kind: 'value',
    placeholder,
    allowed,
    ...(o.show ? { show: o.show } : {}),
    parse: (raw) => (raw === '' || (o.pattern && !o.pattern.test(raw)) ? mustBe(allowed, raw, o.show) : raw),
  });
}

/** One of a fixed set of words. */
export function choiceOption<C extends string, O extends Common<C>>(
  choices: readonly C[],
  o: O,
): OptionSpec<C, WithDefault<O, C>> & { choices: readonly C[] } {
  const allowed =
    choices.length === 2
      ? `${choices[0]} or ${choices[1]}`
      : `${choices.slice(0, -1).join(', ')} or ${choices.at(-1)}`;
  return {
    ...spec(o, {
      kind: 'value',
      placeholder: '<m>',
      allowed,
      parse: (raw) => ((choices as readonly string[]).includes(raw) ? (raw as C) : mustBe(allowed, raw)),
    }),
    choices,
  };
}

/** A number: an integer unless `fraction`, within [min, max]. */
export function numberOption<O extends Common<number>>(
  placeholder: string,
  o: O & { min: number; max?: number; fraction?: boolean },
): OptionSpec<number, WithDefault<O, number>> {
  const allowed = `${o.fraction ? 'a number' : 'an integer'} >= ${o.min}${o.max === undefined ? '' : ` and <= ${o.max}`}`;
  return spec(o, {
    kind: 'value',
    placeholder,
    allowed,
    parse: (raw) => {
      const n = Number(raw);
      const ok =
        raw.trim() !== '' &&
        Number.isFinite(n) &&
        (o.fraction || Number.isSafeInteger(n)) &&
        n >= o.min &&
        (o.max === undefined || n <= o.max);
      return ok ? n : mustBe(allowed, raw);
    },
  });
}

/** A comma-separated list; each item is checked by `item` (undefined: refused). */
export function listOption<I, O extends Common<I[]>>(
  placeholder: string,
  o: O & {
    allowed: string;
    item: (s: string) => I | undefined;
    show?: (raw: string) => string;
    /** A more precise refusal than "must be <allowed>" (e.g. naming the bad item), or undefined. */
    explain?: (raw: string) => Invalid | undefined;
  },
): OptionSpec<I[], WithDefault<O, I[]>> {
  return spec(o, {
    kind: 'value',
    placeholder,
    allowed: o.allowed,
    ...(o.show ? { show: o.show } : {}),
    parse: (raw) => {
      const refused = o.explain?.(raw);
      if (refused) return refused;
      const items = raw.split(',').map((s) => s.trim());
      const out: I[] = [];
      for (const s of items) {
        const v = s === '' ? undefined : o.item(s);
        if (v === undefined) return mustBe(o.allowed, raw, o.show);
        out.push(v);
      }
      return out;
    },
  });
}

/**
 * `key=value` pairs, one a flag (repeatable), a line of the environment variable, an item of a config
 * file's array or an entry of its object. Values are never shown in an error (they may be secrets).
 */
export function pairsOption<O extends Common<Record<string, string>>>(
  placeholder: string,
  o: O & { key: RegExp },
): OptionSpec<Record<string, string>, WithDefault<O, Record<string, string>>> {
  const allowed = 'key=value with a property name as key';
  return {
    ...spec(o, {
      kind: 'value',
      placeholder,
      allowed,
      parse: (raw) => {
        const out: Record<string, string> = {};
        for (const line of raw.split('\n')) {
          if (line.trim() === '') continue;
          const eq = line.indexOf('=');
          const key = (eq < 0 ? line : line.slice(0, eq)).trim();
          if (eq < 0 || !o.key.test(key))
            return new Invalid(` must be ${allowed}, got ${eq < 0 ? 'no "="' : `the key ${quote(key)}`}`);
          out[key] = line.slice(eq + 1);
        }
        return out;
      },
    }),
    repeat: true,
  };
}

/** `host:port` (IPv6 in brackets), or undefined. */
/** A URL as shown in help and errors: its password masked (`//user:***@`). */
export const maskUrl = (raw: string): string => raw.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');

export function hostPort(s: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(s);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535) return undefined;
  return { host: (m[1] as string).replace(/^\[(.*)\]$/, '$1'), port };
}

/** The help text of a verb, generated from its table. */
export function helpText(usage: string, about: string, table: Table): string {
  const lines = [usage, '', about, '', 'Options (flags > environment > --config file > defaults):'];
  const width = 30;
  for (const [name, s] of Object.entries(table)) {
    const left = `  --${name}${s.placeholder ? ` ${s.placeholder}` : ''}`;
    const choices = (s as { choices?: readonly string[] }).choices;
    const facts = [
      choices ? choices.join(' | ') : undefined,
      s.env ? `env ${s.env}` : undefined,
      s.defaultText
        ? `default ${s.defaultText}`
        : s.default !== undefined && s.default !== false
          ? `default ${Array.isArray(s.default) ? s.default.join(',') : String(s.default)}`
          : undefined,
    ].filter((f) => f !== undefined);
    const text = `${s.description}${facts.length ? ` [${facts.join('; ')}]` : ''}`;
    const wrapped = wrap(text, 110 - width);
    const first = left.length < width ? left.padEnd(width) : `${left}\n${' '.repeat(width)}`;
    lines.push(first + wrapped.join(`\n${' '.repeat(width)}`));
  }
  lines.push(
    `  --config <file>             JSON object of options by their flag names ({"mode": "at-least-once"});`,
    `                              unknown keys are refused [env REDFENCE_CONFIG]`,
    '  --help                      show this help',
    '',
    'A switch --x is turned off with --no-x. An empty environment variable counts as unset.',
    '',
  );
  return lines.join('\n');
}

function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      out.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) out.push(line);
  return out;
}

const fail = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads a `--config` file: a JSON object whose keys are option names. */
function readConfig(file: string, table: Table): Map<string, string | boolean> {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message;
    throw fail(`--config ${file}: ${why.split('\n')[0]}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data))
    throw fail(`--config ${file}: must hold a JSON object of options by their flag names`);
  const unknown = Object.keys(data).filter((k) => !Object.hasOwn(table, k));
  if (unknown.length > 0)
    throw fail(
      `--config ${file}: unknown ${unknown.length === 1 ? 'key' : 'keys'} ${unknown.map(quote).join(', ')} (known: ${Object.keys(table).join(', ')})`,
    );
  const out = new Map<string, string | boolean>();
  for (const [k, v] of Object.entries(data)) {
    const s = table[k] as OptionSpec<unknown>;
    const item = (x: unknown) => typeof x === 'string' || (typeof x === 'number' && Number.isFinite(x));
    if (s.repeat && isObject(v) && Object.values(v).every(item))
      out.set(
        k,
        Object.entries(v)
          .map(([key, x]) => `${key}=${x}`)
          .join('\n'),
      );
    else if (s.repeat && Array.isArray(v) && v.every((x) => typeof x === 'string')) out.set(k, v.join('\n'));
    else if (s.kind === 'switch' && typeof v === 'boolean') out.set(k, v);
    else if (s.kind === 'value' && item(v)) out.set(k, String(v));
    else if (s.kind === 'value' && Array.isArray(v) && v.every(item)) out.set(k, v.join(','));
    else
      throw fail(
        `--config ${file}: "${k}" must be ${s.kind === 'switch' ? 'true or false' : `a string or number (${s.allowed})`}`,
      );
  }
  return out;
}

/**
 * Parses a verb's arguments with its table. Throws RF_INVALID_OPTIONS naming the option for unknown
 * flags, missing values, bad values (from any source) and bad config files.
 */
export function parseOptions<T extends Table>(
  table: T,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Parsed<T> {
  const argOptions: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    config: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, s] of Object.entries(table)) {
    argOptions[name] = { type: s.kind === 'switch' ? 'boolean' : 'string' };
    if (s.kind === 'switch') argOptions[`no-${name}`] = { type: 'boolean' };
  }
  const { tokens } = parseArgs({
    args: [...args],
    options: argOptions,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const flags = new Map<string, string | boolean>();
  const positionals: string[] = [];
  const unknown: string[] = [];
  let help = false;
  for (const t of tokens) if (t.kind === 'option' && !argOptions[t.name]) unknown.push(t.rawName);
  if (unknown.length > 0)
    throw fail(`unknown ${unknown.length === 1 ? 'option' : 'options'} ${unknown.join(', ')}`);
  for (const t of tokens) {
    if (t.kind === 'positional') positionals.push(t.value);
    if (t.kind !== 'option') continue;
    const known = argOptions[t.name] as { type: 'string' | 'boolean' };
    if (t.name === 'help') help = true;
    else if (known.type === 'boolean') {
      if (t.inlineValue) throw fail(`${t.rawName} takes no value`);
      const negated = t.name.startsWith('no-') && !Object.hasOwn(table, t.name);
      flags.set(negated ? t.name.slice(3) : t.name, !negated);
    } else {
      if (t.value === undefined || (!t.inlineValue && t.value.startsWith('--')))
        throw fail(`${t.rawName} needs a value`);
      const prev = flags.get(t.name);
      const repeat = (table[t.name] as OptionSpec<unknown> | undefined)?.repeat === true;
      flags.set(t.name, repeat && typeof prev === 'string' ? `${prev}\n${t.value}` : t.value);
    }
  }
  const values: Record<string, unknown> = {};
  const sources: Partial<Record<keyof T, Source>> = {};
  if (help) return { values: values as Values<T>, sources, positionals, help };

  const envValue = (name: string | undefined) => (name && env[name] !== '' ? env[name] : undefined);
  const configFile = (flags.get('config') as string | undefined) ?? envValue('REDFENCE_CONFIG');
  const config = configFile === undefined ? new Map() : readConfig(configFile, table);
  for (const [name, s] of Object.entries(table)) {
    const fromFlag = flags.get(name);
    const fromEnv = envValue(s.env);
    const fromConfig = config.get(name);
    let source: Source;
    let raw: string | boolean;
    let label: string;
    if (fromFlag !== undefined) [source, raw, label] = ['flag', fromFlag, `--${name}`];
    else if (fromEnv !== undefined) [source, raw, label] = ['env', fromEnv, `${s.env} (--${name})`];
    else if (fromConfig !== undefined)
      [source, raw, label] = ['config', fromConfig, `--config ${configFile}: "${name}"`];
    else {
      if (s.default !== undefined) {
        values[name] = s.default;
        sources[name as keyof T] = 'default';
      }
      continue;
    }
    const value = typeof raw === 'boolean' ? raw : s.parse(raw);
    if (value instanceof Invalid) throw fail(`${label}${value.tail}`);
    values[name] = value;
    sources[name as keyof T] = source;
  }
  return { values: values as Values<T>, sources, positionals, help };
}

/** Where a source ranks in the precedence (higher wins). */
export const RANK: Record<Source, number> = { flag: 3, env: 2, config: 1, default: 0 };
