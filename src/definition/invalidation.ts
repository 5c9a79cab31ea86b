/**
 * What a user writes for cache invalidation by events: the topic, the caches it invalidates, and how a
 * record names the entries (a function, or a template like `quotes:{tenantId}:{quoteId}`). The keys are
 * built by the kit's key builder (src/keys/kit.ts) with each cache's name and key encoding, so they are
 * exactly the ones `Cache` reads and writes. A record that names no usable entry (no tenant, a missing
 * field, an unknown cache) fails with RF_KIT_INVALIDATION_KEY, never retried: its partition goes on and
 * the record goes to the dead-letter topic with that reason.
 */

import { RedfenceError } from '../errors/index.js';
import type { KeyEncoding } from '../keys/keys.js';
import { KitKeys } from '../keys/kit.js';
import type { EntryKeys } from '../kit/invalidation/pipeline.js';
import { Checker, invalid, isObject, shown } from '../options/checks.js';
import type { HandlerRecord } from './handler.js';

/** A cache to invalidate: its name (and key encoding), as given to `new Cache(...)`; a `Cache` fits. */
export type CacheRef = string | { readonly name: string; readonly keyEncoding?: KeyEncoding };

/** One entry to invalidate: `cache` may be left out when the definition names one cache. */
export interface InvalidationKey {
  readonly cache?: string;
  readonly tenant: string;
  readonly id: string | Uint8Array;
}

export interface InvalidationDefinition<T = unknown> {
  /** The events to consume. `deadLetter` defaults to `<topic>.DLT`. */
  readonly input: { readonly topic: string; readonly deadLetter?: string };
  /** Names the consumer: its default group `redfence-handler-<name>` and its metrics' `name` label. `[A-Za-z0-9_.-]{1,64}`. */
  readonly name: string;
  /** The cache (or caches) whose entries the events invalidate. */
  readonly cache: CacheRef | readonly CacheRef[];
  /**
   * The entries one record invalidates: a function of the decoded record (returning [] skips it), or a
   * template `<cache>:{<tenant field>}:<id part>[:<id part>...]`, each id part a literal or a
   * `{field}` (dotted paths into the value); the id is the parts joined by `:`.
   */
  readonly keys: string | ((record: HandlerRecord<T>) => readonly InvalidationKey[]);
  /** Turns the value into `record.value`. Default JSON.parse; throwing dead-letters it (`undecodable`). */
  readonly decode?: (value: Buffer | null, record: HandlerRecord<Buffer | null>) => T;
  /** The event's time in ms since the epoch, for the lag metric. Default: the record's timestamp. */
  readonly eventTime?: (record: HandlerRecord<T>) => number | undefined;
}

const FIELDS = ['input', 'name', 'cache', 'keys', 'decode', 'eventTime'];
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const FIELD = /^\{([A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)*)\}$/;

export const INVALIDATION_KIND = Symbol.for('redfence.invalidation');

/** The key builders of the definition's caches, by cache name. */
export type CacheKeys = ReadonlyMap<string, KitKeys>;

function badKey(message: string, cause?: unknown): RedfenceError {
  return new RedfenceError('RF_KIT_INVALIDATION_KEY', message, { cause });
}

function lookup(value: unknown, path: string): unknown {
  let v = value;
  for (const part of path.split('.')) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function field(value: unknown, path: string): string | undefined {
  const v = lookup(value, path);
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** A keys function from a template (checked now: a bad template fails at definition). */
export function keysFromTemplate(
  template: string,
  caches: readonly string[],
): (record: HandlerRecord<unknown>) => InvalidationKey[] {
  const where = 'invalidation definition: keys';
  const parts = template.split(':');
  const [cache, tenant, ...id] = parts;
  if (cache === undefined || !caches.includes(cache)) {
    throw invalid(
      where,
      `template ${shown(template)} must start with a cache it names (${caches.join(', ')})`,
    );
  }
  const tenantField = FIELD.exec(tenant ?? '')?.[1];
  if (tenantField === undefined) {
    throw invalid(where, `template ${shown(template)}: its second part must be the tenant's {field}`);
  }
  if (id.length === 0 || id.some((p) => p === '' || (/[{}]/.test(p) && !FIELD.test(p)))) {
    throw invalid(where, `template ${shown(template)}: the id needs parts (literals or {field})`);
  }
  const idParts = id.map((p) => ({ literal: FIELD.test(p) ? undefined : p, path: FIELD.exec(p)?.[1] }));
  return (record) => {
    const t = field(record.value, tenantField);
    if (t === undefined) throw badKey(`the event has no tenant (field "${tenantField}")`);
    const out: string[] = [];
    for (const p of idParts) {
      if (p.literal !== undefined) out.push(p.literal);
      else {
        const v = field(record.value, p.path as string);
        if (v === undefined) throw badKey(`the event has no "${p.path}" for its cache key`);
        out.push(v);
      }
    }
    return [{ cache, tenant: t, id: out.join(':') }];
  };
}

/** The cache entries of a record's keys, checked: any bad one fails the record with RF_KIT_INVALIDATION_KEY. */
export function entriesOf(keys: unknown, caches: CacheKeys): EntryKeys[] {
  if (!Array.isArray(keys)) throw badKey('keys() must return an array of { tenant, id }');
  const only = caches.size === 1 ? [...caches.values()][0] : undefined;
  const out: EntryKeys[] = [];
  keys.forEach((k: unknown, i) => {
    if (!isObject(k)) throw badKey(`key ${i} is not an object { tenant, id }`);
    const cache = k.cache === undefined ? only : caches.get(k.cache as string);
    if (cache === undefined) {
      throw badKey(
        k.cache === undefined
          ? `key ${i} names no cache (the definition has several)`
          : `key ${i} names a cache the definition does not: ${shown(k.cache)}`,
      );
    }
    if (typeof k.tenant !== 'string' || k.tenant === '') throw badKey(`key ${i} has no tenant`);
    let parts: string[];
    try {
      parts = cache.parts({ tenant: k.tenant, id: k.id as string }, 'v', 'g');
    } catch (err) {
      throw badKey(`key ${i} cannot be a cache key: ${(err as Error).message}`, err);
    }
    out.push({ value: parts[0] as string, generation: parts[1] as string });
  });
  return out;
}

/** The key builders of the caches a definition names (as `Cache` builds them). */
export function cacheKeys(ref: InvalidationDefinition<unknown>['cache']): Map<string, KitKeys> {
  const c = new Checker('invalidation definition');
  const refs = (Array.isArray(ref) ? ref : [ref]) as unknown[];
  if (refs.length === 0) throw invalid(c.where, 'cache must name at least one cache');
  const out = new Map<string, KitKeys>();
  refs.forEach((r, i) => {
    const path = Array.isArray(ref) ? `cache[${i}]` : 'cache';
    const name = typeof r === 'string' ? r : isObject(r) ? r.name : undefined;
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,58}$/.test(name)) {
      throw invalid(
        c.where,
        `${path} must be a cache name ([A-Za-z0-9_.-]{1,58}) or a Cache, got ${shown(r)}`,
      );
    }
    const enc = typeof r === 'string' ? undefined : (r as { keyEncoding?: unknown }).keyEncoding;
    const keyEncoding = c.oneOf<KeyEncoding>(`${path}.keyEncoding`, enc, ['auto', 'hash'], 'auto');
    if (out.has(name)) throw invalid(c.where, `${path} names cache ${shown(name)} twice`);
    out.set(name, new KitKeys('cache', name, { keyEncoding }));
  });
  return out;
}

/**
 * Declares an invalidation consumer; checks its shape at once (RF_INVALID_OPTIONS).
 *
 * @example
 * export default defineInvalidation<QuoteUpdated>({
 *   input: { topic: 'quote-events' }, name: 'quote-cache', cache: 'quotes',
 *   keys: 'quotes:{tenantId}:{quoteId}',
 * });
 */
export function defineInvalidation<T>(definition: InvalidationDefinition<T>): InvalidationDefinition<T> {
  const where = 'invalidation definition';
  const d = new Checker(where).object('', definition, FIELDS);
  const input = new Checker(where).object('input', d.input, ['topic', 'deadLetter']);
  if (typeof input.topic !== 'string' || input.topic === '')
    throw invalid(where, 'input.topic must be a non-empty string');
  if (input.deadLetter !== undefined && (typeof input.deadLetter !== 'string' || input.deadLetter === ''))
    throw invalid(where, 'input.deadLetter must be a non-empty string');
  if (typeof d.name !== 'string' || !NAME.test(d.name))
    throw invalid(where, `name must match ${NAME.source}`);
  const caches = cacheKeys(d.cache as InvalidationDefinition<unknown>['cache']);
  if (typeof d.keys === 'string') keysFromTemplate(d.keys, [...caches.keys()]);
  else if (typeof d.keys !== 'function')
    throw invalid(where, 'keys must be a template string or a function (record) => [{ tenant, id }]');
  for (const k of ['decode', 'eventTime'] as const)
    if (d[k] !== undefined && typeof d[k] !== 'function') throw invalid(where, `${k} must be a function`);
  if (Object.isExtensible(d) && !(INVALIDATION_KIND in d))
    Object.defineProperty(d, INVALIDATION_KIND, { value: true });
  return definition;
}
