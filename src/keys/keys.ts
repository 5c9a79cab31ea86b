/**
 * The one place that builds Redis key names. Every name starts with `rf:` and carries a
 * hash tag (`{...}`) so that each fence script touches keys of a single hash slot.
 *
 * - state of one key:       rf:[t=<tenant>:]{<store>:<key>}
 *   in a fence space:       rf:[t=<tenant>:]{<store>@<space>:<key>} (a topology's sub-topology: below)
 * - partition epoch:        rf:[t=<tenant>:]{<store>:<topic>:<partition>}:epoch
 * - partition pending index rf:[t=<tenant>:]{<store>:<topic>:<partition>}:pending
 * - windows by close time:  rf:[t=<tenant>:]{<store>:<topic>:<partition>}:close:<store id> (topologies)
 * - handler done marker:    rf:[t=<tenant>:]{<store>:<topic>:<partition>}:once:<id>
 * - input partition counts: rf:[t=<tenant>:]{<store>:<topic>}:partition-counts
 * - snapshot mark:          rf:[t=<tenant>:]{<store>:<topic>}:snapshot
 * - handler retry chain:    rf:[t=<tenant>:]{<store>:<topic>:<partition>}:rkey:<key> and :repoch:<retry topic>
 *
 * User keys that are long, contain braces, start with `#`, are binary, or are declared
 * sensitive are stored by a hash of their bytes (`#` + base64url SHA-256) so that the
 * hash tag stays intact and the raw key never appears in Redis key names or logs.
 */
import { createHash } from 'node:crypto';
import { RedfenceError } from '../errors/index.js';
import { BoundedCache } from './cache.js';

/** How user keys become part of Redis key names. */
export type KeyEncoding =
  /** Raw when safe (printable UTF-8 up to `maxRawKeyLength`, no braces, not starting with `#`), else hashed. */
  | 'auto'
  /** Always a SHA-256 of the key bytes: for keys that carry personal data. */
  | 'hash';

export interface KeySpaceOptions {
  /** Logical store name: `[A-Za-z0-9_.-]{1,64}`. */
  store: string;
  /** Optional tenant: `[A-Za-z0-9_.-]{1,64}`; scopes every key so ACLs can grant `rf:t=<tenant>:*`. */
  tenant?: string;
  /** Default `auto`. */
  keyEncoding?: KeyEncoding;
  /** Longest key (in bytes) stored raw under `auto`. Default 128. */
  maxRawKeyLength?: number;
  /**
   * How many state key names (by user key) are kept, so a key seen again is neither checked nor hashed
   * again; emptied when full. Default 65,536; 0: none kept.
   */
  nameCacheSize?: number;
  /**
   * A fence space within the store: state keys become `{<store>@<space>:<key>}`, apart from the store's
   * own `{<store>:<key>}` (a topology's second stateful sub-topology, whose keys follow the offset order
   * of another topic: `space` is that topic, a Kafka topic name). `@` is in neither a store name nor a
   * topic name, so no space's names meet another's or another store's. Only state key names change;
   * the partition keys (epoch, indexes) already name their topic.
   */
  space?: string;
}

/** Default of {@link KeySpaceOptions.nameCacheSize}. */
export const NAME_CACHE_SIZE = 65_536;

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;
// Printable ASCII and any non-control Unicode, no braces; checked on the decoded string.
const SAFE_RAW = /^[^\p{Cc}{}#][^\p{Cc}{}]*$/u;
const decoder = new TextDecoder('utf-8', { fatal: true });

function checkName(what: string, value: unknown): string {
  if (typeof value !== 'string' || !NAME.test(value)) {
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `${what} must match ${NAME.source} (letters, digits, '_', '.', '-'), got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** Checks a Kafka topic name (Kafka's own rule: `[A-Za-z0-9._-]{1,249}`). */
export function checkTopic(topic: unknown): string {
  if (typeof topic !== 'string' || !TOPIC.test(topic)) {
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `topic must be a valid Kafka topic name, got ${JSON.stringify(topic)}`,
    );
  }
  return topic;
}

/** Checks a partition number. */
export function checkPartition(partition: unknown): number {
  if (
    typeof partition !== 'number' ||
    !Number.isInteger(partition) ||
    partition < 0 ||
    partition > 0x7fffffff
  ) {
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `partition must be a non-negative integer, got ${String(partition)}`,
    );
  }
  return partition;
}

/** Builds every Redis key name of one store (optionally of one tenant). */
export class KeySpace {
  readonly store: string;
  readonly tenant: string | undefined;
  readonly keyEncoding: KeyEncoding;
  readonly maxRawKeyLength: number;
  /** The fence space (KeySpaceOptions.space), or undefined: the store's own. */
  readonly space: string | undefined;
  readonly #prefix: string;
  /** `<store>` or `<store>@<space>`: what state key names' hash tags start with. */
  readonly #stateTag: string;
  /** State key names by user key (string keys only): the hot path builds each name once. */
  readonly #names: BoundedCache<string>;

  constructor(options: KeySpaceOptions) {
    this.store = checkName('store', options.store);
    this.tenant = options.tenant === undefined ? undefined : checkName('tenant', options.tenant);
    const enc = options.keyEncoding ?? 'auto';
    if (enc !== 'auto' && enc !== 'hash') {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `keyEncoding must be 'auto' or 'hash', got ${JSON.stringify(enc)}`,
      );
    }
    this.keyEncoding = enc;
    const max = options.maxRawKeyLength ?? 128;
    if (!Number.isInteger(max) || max < 1 || max > 1024) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `maxRawKeyLength must be an integer in 1..1024, got ${String(max)}`,
      );
    }
    this.maxRawKeyLength = max;
    const cache = options.nameCacheSize ?? NAME_CACHE_SIZE;
    if (!Number.isSafeInteger(cache) || cache < 0) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `nameCacheSize must be a non-negative integer, got ${String(cache)}`,
      );
    }
    this.#names = new BoundedCache(cache);
    this.#prefix = this.tenant === undefined ? 'rf:' : `rf:t=${this.tenant}:`;
    this.space = options.space === undefined ? undefined : checkTopic(options.space);
    this.#stateTag = this.space === undefined ? this.store : `${this.store}@${this.space}`;
  }

  /** The Redis key of the state hash of user key `key`. */
  state(key: string | Uint8Array): string {
    if (typeof key !== 'string') return `${this.#prefix}{${this.#stateTag}:${this.keyId(key)}}`;
    let name = this.#names.get(key);
    if (name === undefined) {
      name = `${this.#prefix}{${this.#stateTag}:${this.keyId(key)}}`;
      this.#names.set(key, name);
    }
    return name;
  }

  /**
   * How many state key names are cached now (at most {@link KeySpaceOptions.nameCacheSize}).
   * @internal for tests
   */
  get cachedNames(): number {
    return this.#names.size;
  }

  /** The Redis key of a partition's epoch counter. */
  epoch(topic: string, partition: number): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}:${checkPartition(partition)}}:epoch`;
  }

  /** The Redis key of a partition's index of state keys that hold pending outputs. */
  pendingIndex(topic: string, partition: number): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}:${checkPartition(partition)}}:pending`;
  }

  /**
   * The Redis key of a partition's close-time index of open windows of window store `store` (a topology's
   * emit-final): a sorted set, score = window start, member = `<start>:<key bytes>` (so members of one
   * start are in key byte order, Kafka Streams' emission order). In the partition's slot, beside its epoch.
   */
  closeIndex(topic: string, partition: number, store: number): string {
    if (!Number.isInteger(store) || store < 0 || store > 65_535)
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `store id must be an integer 0..65535, got ${String(store)}`,
      );
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}:${checkPartition(partition)}}:close:${store}`;
  }

  /**
   * The Redis key of a handler's done marker for idempotency id `id` on a partition (ctx.once). In the
   * partition's slot, so one script checks the partition's epoch and sets the marker. The id is
   * stored raw when safe, else hashed (as state keys).
   */
  once(topic: string, partition: number, id: string): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}:${checkPartition(partition)}}:once:${this.keyId(id)}`;
  }

  /**
   * The Redis key of the set of partition counts the input topic has had while this store was written
   * (a sorted set, score = member = the count), so that records placed by murmur2 under an earlier
   * count still pass the partition check after partitions were added.
   */
  partitionCounts(topic: string): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}}:partition-counts`;
  }

  /**
   * The Redis key of the store's snapshot mark for input `topic`: a token that lives as long as the
   * store's data does, so a snapshot pass sees that Redis lost it (src/snapshot).
   */
  snapshotMark(topic: string): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}}:snapshot`;
  }

  /**
   * The Redis key of a handler's retry-chain list for Kafka key `key` of an input partition (retry
   * topics with `keyOrder`): the main-topic offsets of the key's records in the chain, oldest first.
   * In the input partition's slot; the key is stored raw when safe, else hashed.
   */
  retryKeyOrder(topic: string, partition: number, key: string | Uint8Array): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}:${checkPartition(partition)}}:rkey:${this.keyId(key)}`;
  }

  /**
   * The epoch counter of retry topic `retryTopic`'s partition `partition`, kept in the slot of the
   * input partition of the same number so that one script can fence a retry-chain list by it.
   */
  retryEpoch(topic: string, partition: number, retryTopic: string): string {
    return `${this.#prefix}{${this.store}:${checkTopic(topic)}:${checkPartition(partition)}}:repoch:${checkTopic(retryTopic)}`;
  }

  /** A pattern matching every state key of this store (of its fence space, if any) (for SCAN-based tools). */
  statePattern(): string {
    return `${this.#prefix}{${this.#stateTag}:*}`;
  }

  /**
   * The form of `key` used inside Redis key names: the key itself when it is safe to store raw,
   * else `#` + base64url(SHA-256(key bytes)). Stable across versions: changing it orphans state.
   */
  keyId(key: string | Uint8Array): string {
    let text: string | undefined;
    let bytes: Uint8Array | undefined;
    if (typeof key === 'string') {
      text = key;
    } else if (key instanceof Uint8Array) {
      bytes = key;
      try {
        text = decoder.decode(key);
      } catch {
        text = undefined; // binary key: always hashed
      }
    } else {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `a state key must be a string or a Uint8Array/Buffer, got ${key === null ? 'null' : typeof key}`,
      );
    }
    if (
      this.keyEncoding === 'auto' &&
      text !== undefined &&
      text.length > 0 &&
      Buffer.byteLength(text) <= this.maxRawKeyLength &&
      SAFE_RAW.test(text)
    ) {
      return text;
    }
    return `#${createHash('sha256')
      .update(bytes ?? Buffer.from(text ?? '', 'utf8'))
      .digest('base64url')}`;
  }

  /** A log-safe description of a user key: never the key text, only a short digest. */
  static describeKey(key: string | Uint8Array): string {
    return `key#${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
  }
}
