/**
 * Queryable state (docs/streams.md, "Queryable state"): a topology's stores read from any process that
 * reaches its Redis, with no RPC between instances (unlike Kafka Streams' interactive queries, every
 * instance's state is in Redis already). The caller names the topology by the same built topology the
 * processor runs (`topology(...).build()`, or the module `redfence run` runs): its application id
 * names the Redis keys, its stores' names give their ids (`storeIdOf`), and its serdes encode keys and
 * decode values, exactly as the executor does (the executor's own plan is made here, so a topology it
 * cannot run is refused the same way, RF_TOPOLOGY_UNSUPPORTED).
 *
 * @example
 * const state = new TopologyState(built, { redis });
 * const { value, stamp } = await state.keyValueStore<string, number>('order-count').get('c1');
 * // value: 3; stamp: { partition: 0, offset: 41, epoch: 2 } (the last record applied to 'c1')
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { KeyEncoding } from '../../keys/index.js';
import { KeyStore } from '../../store/index.js';
import { isBuiltTopology } from '../build.js';
import { hasPatterns, patternStandIns, resolvePatterns } from '../patterns.js';
import { type AggregatePlan, planTopology, type RunPlan } from '../run/plan.js';
import { layoutCheck } from '../run/stored.js';
import type { BuiltTopology, StoreSpec } from '../types.js';
import {
  KeyValueReader,
  type ReadOnlyKeyValueStore,
  type ReadOnlySessionStore,
  type ReadOnlyWindowStore,
  SessionReader,
  type StoreContext,
  WindowReader,
} from './stores.js';

/** A store of {@link TopologyState.stores}. */
export interface StateStoreInfo extends StoreSpec {
  /** The one topic its sub-topology reads (its answers' stamps are of it). */
  readonly topic: string;
  /** Its fence space: null for the application's own keys, else `topic` (keys `rf:{<app>@<topic>:<key>}`). */
  readonly space: string | null;
}

export interface TopologyStateOptions {
  /** An ioredis `Redis` or `Cluster` reaching the Redis the topology runs on (read-only use). */
  readonly redis: Redis | Cluster;
  /** The `tenant` the processor runs with (default none). */
  readonly tenant?: string;
  /** The `keyEncoding` the executor runs with (default `auto`). */
  readonly keyEncoding?: KeyEncoding;
  /**
   * The cluster's topic names (`await port.listTopics()`), for a topology with a source reading a
   * pattern: its patterns are then resolved as the processor resolves them at start (patterns.ts).
   * Without it, each pattern stands for its topics (a store's `topic` shows the pattern), which reads
   * the same keys unless a store's fence space is a pattern's topic (RF_INVALID_OPTIONS then).
   */
  readonly topics?: readonly string[];
}

const OPTION_KEYS: readonly (keyof TopologyStateOptions)[] = ['redis', 'tenant', 'keyEncoding', 'topics'];

/** The executor's plan; with patterns, resolved against `topics` or planned with stand-ins (see `topics`). */
function planOf(built: BuiltTopology, topics: readonly string[] | undefined): RunPlan {
  if (!hasPatterns(built)) return planTopology(built);
  if (topics !== undefined) {
    if (!Array.isArray(topics) || topics.some((t) => typeof t !== 'string'))
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        'TopologyState: option "topics" must be an array of topic names',
      );
    return planTopology(resolvePatterns(built, topics).built);
  }
  const plan = planTopology(patternStandIns(built));
  const standIns = new Set(plan.inputs.filter((t) => t.startsWith('/'))); // no topic name has a '/'
  for (const a of plan.aggregates.values())
    if (a.space !== null && standIns.has(a.space))
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `TopologyState: store ${a.node.store} keeps its keys in the fence space of the topic its pattern ${a.space} matched: ` +
          'pass option "topics" (await port.listTopics()) to resolve it',
      );
  return plan;
}

const READER: Record<StoreSpec['kind'], string> = {
  'key-value': 'keyValueStore',
  window: 'windowStore',
  session: 'sessionStore',
};

function kindOf(agg: AggregatePlan): StoreSpec['kind'] {
  const w = agg.node.window;
  return w === null ? 'key-value' : w.kind === 'session' ? 'session' : 'window';
}

/** The stores of one built topology, read from Redis. */
export class TopologyState {
  readonly applicationId: string;
  /** The application's own fence space (and its layout marker). */
  readonly #store: KeyStore;
  /** The fence spaces of later stateful sub-topologies, by space (plan.ts). */
  readonly #spaces = new Map<string, KeyStore>();
  readonly #byName: ReadonlyMap<string, AggregatePlan>;
  readonly #plan: RunPlan;
  /** The layout check passed (the marker holds this version's layout): not asked again. */
  #layoutOk = false;

  constructor(topology: BuiltTopology, options: TopologyStateOptions) {
    if (!isBuiltTopology(topology))
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        'TopologyState: topology must be what topology(...).build() returns',
      );
    if (options === null || typeof options !== 'object')
      throw new RedfenceError('RF_INVALID_OPTIONS', 'TopologyState options must be an object');
    for (const k of Object.keys(options))
      if (!OPTION_KEYS.includes(k as keyof TopologyStateOptions))
        throw new RedfenceError('RF_INVALID_OPTIONS', `TopologyState: unknown option ${JSON.stringify(k)}`);
    const plan = planOf(topology, options.topics);
    const { redis, tenant, keyEncoding } = options;
    const storeOf = (space: string | null) =>
      new KeyStore({
        redis,
        app: topology.applicationId,
        ...(tenant === undefined ? {} : { tenant }),
        ...(keyEncoding === undefined ? {} : { keyEncoding }),
        ...(space === null ? {} : { space }),
      });
    try {
      this.#store = storeOf(null);
      for (const a of plan.aggregates.values())
        if (a.space !== null && !this.#spaces.has(a.space)) this.#spaces.set(a.space, storeOf(a.space));
    } catch (err) {
      const message = (err as Error).message.replace(/^KeyStore/, 'TopologyState');
      throw new RedfenceError('RF_INVALID_OPTIONS', message, { cause: err });
    }
    this.applicationId = topology.applicationId;
    this.#plan = plan;
    this.#byName = new Map([...plan.aggregates.values()].map((a) => [a.node.store, a]));
  }

  /**
   * The stores that can be queried: name, kind, the topic their stamps are of and their fence space
   * (null: the application's own; else the topic, docs/streams.md "Fence spaces").
   *
   * @example
   * state.stores; // [{ name: 'per-region', node: 'KSTREAM-AGGREGATE-0000000006', kind: 'key-value',
   * //               topic: 'fraud-by-region-repartition', space: 'fraud-by-region-repartition' }, ...]
   */
  get stores(): readonly StateStoreInfo[] {
    return [...this.#byName.values()].map((a) => ({
      name: a.node.store,
      node: a.node.name,
      kind: kindOf(a),
      topic: a.topic,
      space: a.space,
    }));
  }

  /** The key-value store `name` (an unwindowed count, reduce or aggregate). */
  keyValueStore<K = unknown, V = unknown>(name: string): ReadOnlyKeyValueStore<K, V> {
    return new KeyValueReader<K, V>(this.#context(name, 'key-value'));
  }

  /** The window store `name` (a count, reduce or aggregate in tumbling or hopping windows). */
  windowStore<K = unknown, V = unknown>(name: string): ReadOnlyWindowStore<K, V> {
    return new WindowReader<K, V>(this.#context(name, 'window'));
  }

  /** The session store `name` (a count, reduce or aggregate in session windows). */
  sessionStore<K = unknown, V = unknown>(name: string): ReadOnlySessionStore<K, V> {
    return new SessionReader<K, V>(this.#context(name, 'session'));
  }

  /** The kind of store `name` (RF_STORE_UNKNOWN when the topology has none of that name). */
  kindOf(name: string): StoreSpec['kind'] {
    return kindOf(this.#find(name));
  }

  #find(name: string): AggregatePlan {
    if (typeof name !== 'string')
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'TopologyState: a store name must be a string');
    const agg = this.#byName.get(name);
    if (agg === undefined) {
      const stores = [...this.#byName.keys()];
      throw new RedfenceError(
        'RF_STORE_UNKNOWN',
        `topology ${this.applicationId} has no store ${JSON.stringify(name)} (its stores: ${stores.length === 0 ? 'none' : stores.join(', ')})`,
        { details: { store: name, stores } },
      );
    }
    return agg;
  }

  #context(name: string, wanted: StoreSpec['kind']): StoreContext {
    const agg = this.#find(name);
    const kind = kindOf(agg);
    if (kind !== wanted)
      throw new RedfenceError(
        'RF_STORE_KIND',
        `store ${JSON.stringify(name)} of topology ${this.applicationId} is a ${kind} store, not a ${wanted} store: read it with ${READER[kind]}(${JSON.stringify(name)})`,
        { details: { store: name, kind, wanted } },
      );
    const store = agg.space === null ? this.#store : (this.#spaces.get(agg.space) as KeyStore);
    return { store, agg, layout: () => this.#layout() };
  }

  /** Time windows are read only in this version's layout (RF_STATE_LAYOUT otherwise; read-only: nothing claimed). */
  async #layout(): Promise<void> {
    if (this.#layoutOk) return;
    this.#layoutOk = (await this.#store.checkLayout(layoutCheck(this.#plan, false))) !== null;
  }
}
