/**
 * A user's processor module under the chaos harness (`redfence chaos <module>`): loading it in the
 * harness's process (the same loader as `redfence run`), and the input records of a run, from the
 * module's own generator or from a JSON Lines file.
 *
 * The generator contract: the module may export
 *
 *   export function chaosInput(rng, n) { ... }   // an array (or any iterable) of { key, value }
 *
 * called once per comparison with a seeded random source (`rng.next()` in [0, 1), `rng.int(n)` in
 * [0, n), `rng.range(lo, hi)` inclusive, `rng.pick(list)`) and `--records` as `n`. Each record's `key`
 * is a string, null (dead-lettered as `null-key` by the processor) or any other JSON value (written
 * as its JSON text); its `value` is a string (its UTF-8 bytes), a Buffer/Uint8Array (as is), null
 * (a null value) or any other JSON value (its JSON text). A `--input` file has one such record per
 * line as JSON (`{"key":"k1","value":{"n":3}}`); blank lines are skipped.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { RedfenceError } from '../errors/index.js';
import type { HandlerDefinition, ProcessorDefinition } from '../index.js';
import { Rng } from './rng.js';

/** The seeded random source handed to `chaosInput`. */
export interface ChaosRandom {
  next(): number;
  int(n: number): number;
  range(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
}

/** One input record as the user gives it. */
export interface ChaosRecord {
  key: unknown;
  value: unknown;
  /** Its CreateTime in ms after the run's base (default: its index): a topology's event time. */
  timestamp?: number;
  /**
   * A topology's records only: the module's topic it goes to (one of its input topics, or a name a
   * pattern source matches); default: its first input topic (src/chaos/topology-module.ts).
   */
  topic?: string;
}

/** One input record as it is produced (to both runs, the same bytes on the same partition). */
export interface InputRecord {
  key: Buffer | null;
  value: Buffer | null;
  /** ms after the run's timestamp base; undefined: the record's index. */
  timestamp?: number;
  /** The module's topic it goes to (a topology's records; src/chaos/topology-module.ts). */
  topic?: string;
}

/** More records than this in one comparison are refused (both runs keep every output in memory). */
export const MAX_RECORDS = 2_000_000;

export interface LoadedModule {
  /** The absolute path the instances load. */
  path: string;
  definition: ProcessorDefinition | HandlerDefinition;
  /** The module's `chaosInput`, when it exports one. */
  generator?: (rng: ChaosRandom, n: number) => Iterable<ChaosRecord>;
}

const moduleError = (message: string) => new RedfenceError('RF_MODULE_INVALID', message);
const inputError = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/**
 * Loads `file` as `redfence run` does (RF_MODULE_INVALID when it cannot), and refuses a handler: the
 * comparison is of state and outputs, which only a processor has.
 */
export async function loadChaosModule(file: string): Promise<LoadedModule> {
  const { loadDefinition } = await import('../loader/load.js');
  const loaded = await loadDefinition(file);
  if ('handle' in loaded)
    throw moduleError(
      `${file} exports a handler; redfence chaos <module> compares a processor's state and outputs (defineProcessor); redfence chaos --handler <module> runs a handler`,
    );
  return withGenerator(file, loaded);
}

/**
 * Loads a handler module for `redfence chaos --handler <module>`: RF_MODULE_INVALID for a processor
 * and for a handler with retry topics (the harness gives the handler only its input and dead-letter
 * topics, and the far side is told records by their input partition and offset).
 */
export async function loadChaosHandler(file: string): Promise<LoadedModule> {
  const { loadDefinition } = await import('../loader/load.js');
  const loaded = await loadDefinition(file);
  if (!('handle' in loaded))
    throw moduleError(
      `${file} exports a processor; redfence chaos --handler runs a handler (defineHandler); drop --handler to compare a processor`,
    );
  if ((loaded as HandlerDefinition).retry?.topics !== undefined)
    throw moduleError(`${file}: redfence chaos --handler runs handlers without retry topics`);
  return withGenerator(file, loaded);
}

async function withGenerator(
  file: string,
  loaded: ProcessorDefinition | HandlerDefinition,
): Promise<LoadedModule> {
  return { ...(await generatorOf(file)), definition: loaded };
}

/** The module's absolute path and its `chaosInput`, if it exports one (RF_MODULE_INVALID: not a function). */
export async function generatorOf(file: string): Promise<Pick<LoadedModule, 'path' | 'generator'>> {
  const path = resolve(file);
  // already imported (and TypeScript registered) by loadDefinition: the same module instance
  const mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  const inner = typeof mod.default === 'object' && mod.default !== null ? mod.default : {};
  const generator = mod.chaosInput ?? (inner as Record<string, unknown>).chaosInput;
  if (generator !== undefined && typeof generator !== 'function')
    throw moduleError(`${file}: chaosInput must be a function (rng, n) => records`);
  return {
    path,
    ...(generator === undefined ? {} : { generator: generator as LoadedModule['generator'] & {} }),
  };
}

const isJsonValue = (v: unknown) =>
  v === null || ['string', 'number', 'boolean', 'object'].includes(typeof v);

/** A user record's bytes; `where` names it in the error. */
export function toInputRecord(r: unknown, where: string, fail: (m: string) => RedfenceError): InputRecord {
  if (typeof r !== 'object' || r === null || Array.isArray(r))
    throw fail(`${where}: a record is an object { key, value }`);
  const { key, value } = r as ChaosRecord;
  if (!('key' in r) || key === undefined) throw fail(`${where}: no "key" (a string, JSON, or null)`);
  if (!('value' in r) || value === undefined) throw fail(`${where}: no "value" (a string, JSON, or null)`);
  const bytes = (x: unknown, what: string): Buffer | null => {
    if (x === null) return null;
    if (typeof x === 'string') return Buffer.from(x, 'utf8');
    if (x instanceof Uint8Array) return Buffer.from(x);
    if (!isJsonValue(x)) throw fail(`${where}: ${what} is a ${typeof x}, not a string or JSON value`);
    const text = JSON.stringify(x);
    if (text === undefined) throw fail(`${where}: ${what} cannot be written as JSON`);
    return Buffer.from(text, 'utf8');
  };
  const { timestamp, topic } = r as ChaosRecord;
  if (timestamp !== undefined && (!Number.isSafeInteger(timestamp) || timestamp < 0))
    throw fail(`${where}: "timestamp" is ms after the run's start, an integer >= 0`);
  if (topic !== undefined && (typeof topic !== 'string' || !/^[A-Za-z0-9._-]{1,200}$/.test(topic)))
    throw fail(`${where}: "topic" is a topic name ([A-Za-z0-9._-], at most 200 characters)`);
  return {
    key: bytes(key, 'key'),
    value: bytes(value, 'value'),
    ...(timestamp === undefined ? {} : { timestamp }),
    ...(topic === undefined ? {} : { topic }),
  };
}

/** The records of `chaosInput(rng, n)`, seeded by `seed`; RF_MODULE_INVALID when it misbehaves. */
export function generateInput(
  m: Pick<LoadedModule, 'path' | 'generator'>,
  seed: number,
  n: number,
): InputRecord[] {
  if (!m.generator)
    throw moduleError(
      `${m.path} exports no chaosInput(rng, n); export one (docs/chaos.md) or give --input <file.jsonl>`,
    );
  let produced: Iterable<ChaosRecord>;
  try {
    produced = m.generator(new Rng(seed, 'module-input'), n);
  } catch (err) {
    throw moduleError(`chaosInput threw: ${(err as Error).message ?? err}`);
  }
  if (
    produced === null ||
    typeof (produced as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function'
  )
    throw moduleError('chaosInput must return an array (or an iterable) of { key, value }');
  const out: InputRecord[] = [];
  try {
    for (const r of produced) {
      if (out.length >= MAX_RECORDS) throw moduleError(`chaosInput gave more than ${MAX_RECORDS} records`);
      out.push(toInputRecord(r, `chaosInput record ${out.length}`, moduleError));
    }
  } catch (err) {
    if (RedfenceError.is(err)) throw err;
    throw moduleError(`chaosInput threw: ${(err as Error).message ?? err}`);
  }
  if (out.length === 0) throw moduleError('chaosInput gave no records');
  return out;
}

/** The records of a JSON Lines file; RF_INVALID_OPTIONS naming the line that is not a record. */
export async function readInputFile(file: string): Promise<InputRecord[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw inputError(`--input ${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
  const out: InputRecord[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).trim();
    if (line === '') continue;
    const where = `--input ${file} line ${i + 1}`;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw inputError(`${where}: not JSON`);
    }
    out.push(toInputRecord(parsed, where, inputError));
    if (out.length > MAX_RECORDS) throw inputError(`--input ${file}: more than ${MAX_RECORDS} records`);
  }
  if (out.length === 0) throw inputError(`--input ${file}: no records`);
  return out;
}
