/**
 * The streams DSL's classes, Kafka Streams' vocabulary: KStream (a record stream), its split, the grouped
 * and windowed grouped streams, KTable. Every operator adds a node to the builder's graph and returns a new
 * object; types flow from the source to the sink. (One file: the classes refer to each other in a circle;
 * what they share besides each other is in dsl-support.ts.)
 */
import { RedfenceError } from '../errors/index.js';
import { type AggregateRequest, addAggregate, type GroupedState, type Materialized } from './aggregation.js';
import {
  addRepartition,
  countAggregator,
  flip,
  type Grouped,
  type Named,
  type Produced,
  type Repartitioned,
  reduceAggregator,
  type StreamState,
  storeSerde,
  type WindowSettings,
} from './dsl-support.js';
import { DEFAULT_SERDE, mustBeFunction } from './graph.js';
import type { AggregateParams, Fn2, Fn3, Windowed } from './types.js';
import type { SessionWindows, SlidingWindows, TimeWindows, Windows } from './windows.js';

/** A record stream: every operator returns a new stream. */
export class KStream<K, V> {
  /** @internal */
  readonly state: StreamState;

  /** @internal */
  constructor(state: StreamState) {
    this.state = state;
  }

  private next<K2, V2>(node: string, change: Partial<Omit<StreamState, 'graph' | 'node'>>): KStream<K2, V2> {
    return new KStream<K2, V2>({ ...this.state, ...change, node });
  }

  private add(kind: string, prefix: string, params: object, named: Named | undefined): string {
    for (const [k, v] of Object.entries(params)) {
      if (k === 'predicate' || k === 'mapper' || k === 'action') mustBeFunction(kind, v);
    }
    const g = this.state.graph;
    const name = g.nameOr(named?.name, prefix);
    return g.add({ kind, name, ...params } as never, [this.state.node]);
  }

  /** Keeps the records for which `predicate(key, value)` holds. */
  filter(predicate: (key: K, value: V) => boolean, named?: Named): KStream<K, V> {
    return this.next(this.add('filter', 'KSTREAM-FILTER', { predicate, not: false }, named), {});
  }

  /** Keeps the records for which `predicate(key, value)` does not hold. */
  filterNot(predicate: (key: K, value: V) => boolean, named?: Named): KStream<K, V> {
    return this.next(this.add('filter', 'KSTREAM-FILTER', { predicate, not: true }, named), {});
  }

  /** A new key and value per record, `[key, value]` (the key changes: a later aggregation repartitions). */
  map<K2, V2>(mapper: (key: K, value: V) => readonly [K2, V2], named?: Named): KStream<K2, V2> {
    const node = this.add('map', 'KSTREAM-MAP', { mapper }, named);
    return this.next(node, { keySerde: DEFAULT_SERDE, valueSerde: DEFAULT_SERDE, keyChanged: true });
  }

  /** A new value per record; the key stays. */
  mapValues<V2>(mapper: (value: V, key: K) => V2, named?: Named): KStream<K, V2> {
    mustBeFunction('mapValues', mapper);
    const node = this.add('mapValues', 'KSTREAM-MAPVALUES', { mapper: flip(mapper) }, named);
    return this.next(node, { valueSerde: DEFAULT_SERDE });
  }

  /** Zero or more `[key, value]` records per record (the key changes). */
  flatMap<K2, V2>(mapper: (key: K, value: V) => Iterable<readonly [K2, V2]>, named?: Named): KStream<K2, V2> {
    const node = this.add('flatMap', 'KSTREAM-FLATMAP', { mapper }, named);
    return this.next(node, { keySerde: DEFAULT_SERDE, valueSerde: DEFAULT_SERDE, keyChanged: true });
  }

  /** Zero or more values per record, each with the record's key. */
  flatMapValues<V2>(mapper: (value: V, key: K) => Iterable<V2>, named?: Named): KStream<K, V2> {
    mustBeFunction('flatMapValues', mapper);
    const node = this.add('flatMapValues', 'KSTREAM-FLATMAPVALUES', { mapper: flip(mapper) }, named);
    return this.next(node, { valueSerde: DEFAULT_SERDE });
  }

  /** A new key per record; the value stays (the key changes). */
  selectKey<K2>(mapper: (key: K, value: V) => K2, named?: Named): KStream<K2, V> {
    const node = this.add('selectKey', 'KSTREAM-KEY-SELECT', { mapper }, named);
    return this.next(node, { keySerde: DEFAULT_SERDE, keyChanged: true });
  }

  /** Calls `action(key, value)` for each record and passes it on unchanged. */
  peek(action: (key: K, value: V) => void, named?: Named): KStream<K, V> {
    return this.next(this.add('peek', 'KSTREAM-PEEK', { action }, named), {});
  }

  /** Splits the stream: each record goes to the first branch whose predicate holds. */
  split(named?: Named): BranchedKStream<K, V> {
    const name = this.state.graph.nameOr(named?.name, 'KSTREAM-BRANCH');
    return new BranchedKStream<K, V>(this.state, name);
  }

  /** The records of both streams, each in its own order. */
  merge(other: KStream<K, V>, named?: Named): KStream<K, V> {
    const g = this.state.graph;
    if (other.state.graph !== g) throw new TypeError('merge: both streams must come from the same topology');
    const name = g.nameOr(named?.name, 'KSTREAM-MERGE');
    g.add({ kind: 'merge', name }, [this.state.node, other.state.node]);
    return this.next(name, { keyChanged: this.state.keyChanged || other.state.keyChanged });
  }

  /**
   * Writes the stream to its repartition topic `<applicationId>-<name>-repartition` and reads it back
   * (a new sub-topology), placing each record by murmur2 of its key, whether or not the key changed; a
   * later `groupByKey()` needs no further repartition. Records with a null key pass, as in Kafka Streams.
   *
   * @example
   * t.stream<string, Order>('orders', { key: serdes.string() })
   *   .selectKey((_k, o) => o.region)
   *   .repartition({ name: 'by-region', numberOfPartitions: 6, key: serdes.string() })
   *   .groupByKey()
   *   .count({ name: 'orders-per-region' });
   */
  repartition(repartitioned?: Repartitioned<K, V>): KStream<K, V> {
    const state = addRepartition(this.state, repartitioned as Repartitioned<unknown, unknown> | undefined);
    return new KStream<K, V>(state);
  }

  /** Writes the stream to `topic` (default serdes: the stream's). */
  to(topic: string, produced?: Produced<K, V>): void {
    const params = {
      topic,
      keySerde: produced?.key ?? this.state.keySerde,
      valueSerde: produced?.value ?? this.state.valueSerde,
      internal: false,
      repartition: null,
    };
    this.add('sink', 'KSTREAM-SINK', params, produced);
  }

  /** Groups by the current key (repartitioned first when the key changed). */
  groupByKey(grouped?: Grouped<K, V>): KGroupedStream<K, V> {
    return new KGroupedStream<K, V>(
      {
        ...this.state,
        keySerde: grouped?.key ?? this.state.keySerde,
        valueSerde: grouped?.value ?? this.state.valueSerde,
      },
      grouped?.name,
    );
  }

  /** Groups by a new key `selector(key, value)`: always repartitioned (Kafka Streams: selectKey + groupByKey). */
  groupBy<K2>(selector: (key: K, value: V) => K2, grouped?: Grouped<K2, V>): KGroupedStream<K2, V> {
    const keyed = this.selectKey(selector);
    return keyed.groupByKey(grouped);
  }
}

/** The branches of a split, each named; `defaultBranch()` or `noDefaultBranch()` returns them. */
export class BranchedKStream<K, V> {
  private readonly branches: { name: string; predicate: Fn2 | null }[] = [];

  /** @internal */
  constructor(
    private readonly state: StreamState,
    private readonly name: string,
  ) {}

  /** Adds a branch: records for which `predicate` holds (and no earlier branch's). Name: `<split name><name or number>`. */
  branch(predicate: (key: K, value: V) => boolean, name?: string): this {
    mustBeFunction('branch', predicate);
    this.branches.push({ name: this.branchName(name), predicate: predicate as Fn2 });
    return this;
  }

  /** Ends the split with a branch of the records no predicate took; returns every branch by name. */
  defaultBranch(name?: string): Record<string, KStream<K, V>> {
    this.branches.push({ name: this.branchName(name ?? '0'), predicate: null });
    return this.finish();
  }

  /** Ends the split; records no predicate took are dropped. */
  noDefaultBranch(): Record<string, KStream<K, V>> {
    return this.finish();
  }

  private branchName(name: string | undefined): string {
    return `${this.name}-${name ?? String(this.branches.length + 1)}`;
  }

  private finish(): Record<string, KStream<K, V>> {
    const g = this.state.graph;
    const branches = this.branches.map((b) => Object.freeze({ ...b }));
    g.add({ kind: 'split', name: this.name, branches: Object.freeze(branches) }, [this.state.node]);
    const out: Record<string, KStream<K, V>> = {};
    for (const b of branches) {
      g.add({ kind: 'branch', name: b.name }, [this.name]);
      out[b.name] = new KStream<K, V>({ ...this.state, node: b.name });
    }
    return out;
  }
}

/** A stream grouped by key: aggregations make tables of it. */
export class KGroupedStream<K, V> {
  private readonly g: GroupedState;

  /** @internal */
  constructor(state: StreamState, groupName: string | undefined) {
    this.g = { ...state, groupName };
  }

  /** Counts the records of each key (null keys and null values are dropped, as Kafka Streams does). */
  count(materialized?: Materialized<number>): KTable<K, number> {
    return this.table(
      'count',
      'KSTREAM-AGGREGATE',
      materialized,
      () => 0,
      (_k, _v, a) => (a as number) + 1,
    );
  }

  /** Combines the values of each key: the first value, then `reducer(aggregate, value)`. */
  reduce(reducer: (aggregate: V, value: V) => V, materialized?: Materialized<V>): KTable<K, V> {
    return this.table('reduce', 'KSTREAM-REDUCE', materialized, () => null, reduceAggregator(reducer));
  }

  /** Folds the values of each key: `initializer()`, then `aggregator(key, value, aggregate)`. */
  aggregate<A>(
    initializer: () => A,
    aggregator: (key: K, value: V, aggregate: A) => A,
    materialized?: Materialized<A>,
  ): KTable<K, A> {
    return this.table('aggregate', 'KSTREAM-AGGREGATE', materialized, initializer, aggregator as Fn3);
  }

  /** Windows the grouped stream: session windows. */
  windowedBy(windows: SessionWindows): SessionWindowedKStream<K, V>;
  /** Windows the grouped stream: tumbling, hopping or sliding windows. */
  windowedBy(windows: TimeWindows | SlidingWindows): TimeWindowedKStream<K, V>;
  windowedBy(windows: Windows): TimeWindowedKStream<K, V> | SessionWindowedKStream<K, V> {
    if (typeof (windows as Partial<Windows> | null)?.spec !== 'function') {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        'windowedBy: expects TimeWindows, SlidingWindows or SessionWindows',
      );
    }
    const spec = windows.spec();
    const settings: WindowSettings = { spec, emit: 'update', onLate: 'dead-letter' };
    return spec.kind === 'session'
      ? new SessionWindowedKStream<K, V>(this.g, settings)
      : new TimeWindowedKStream<K, V>(this.g, settings);
  }

  private table<A>(
    op: AggregateParams['op'],
    prefix: AggregateRequest['prefix'],
    m: Materialized<A> | undefined,
    initializer: () => unknown,
    aggregator: Fn3,
  ): KTable<K, A> {
    const valueSerde = storeSerde(op, m, this.g);
    const req = { op, prefix, storeName: m?.name, window: null, initializer, aggregator, merger: null };
    const node = addAggregate(this.g, { ...req, valueSerde, emit: 'update', onLate: 'dead-letter' });
    return new KTable<K, A>({ ...this.g, node, valueSerde, keyChanged: false });
  }
}

/** What the windowed grouped streams share: emit and late settings, and the aggregate node. */
export abstract class WindowedStreamBase<K> {
  /** @internal */
  protected readonly g: GroupedState;
  /** @internal */
  protected readonly settings: WindowSettings;

  /** @internal */
  constructor(g: GroupedState, settings: WindowSettings) {
    this.g = g;
    this.settings = settings;
  }

  /** @internal */
  protected abstract copy(settings: WindowSettings): this;

  /** 'update' (default): every change of a window's aggregate; 'final': each window's result once, when it closes. */
  emit(mode: 'update' | 'final'): this {
    return this.copy({ ...this.settings, emit: mode });
  }

  /** 'dead-letter' (default): a late record is returned as a dead letter with the windows it missed; 'drop': dropped. */
  onLate(mode: 'dead-letter' | 'drop'): this {
    return this.copy({ ...this.settings, onLate: mode });
  }

  /** @internal */
  protected windowed<A>(
    op: AggregateParams['op'],
    prefix: AggregateRequest['prefix'],
    m: Materialized<A> | undefined,
    fns: { initializer: () => unknown; aggregator: Fn3; merger: Fn3 | null },
  ): KTable<Windowed<K>, A> {
    const valueSerde = storeSerde(op, m, this.g);
    const { spec, emit, onLate } = this.settings;
    const req = { op, prefix, storeName: m?.name, window: spec, ...fns, valueSerde, emit, onLate };
    const node = addAggregate(this.g, req);
    const state = { ...this.g, node, keySerde: DEFAULT_SERDE, valueSerde, keyChanged: false };
    return new KTable<Windowed<K>, A>(state);
  }
}

/** A grouped stream in time windows (tumbling, hopping) or sliding windows. */
export class TimeWindowedKStream<K, V> extends WindowedStreamBase<K> {
  /** @internal */
  protected copy(settings: WindowSettings): this {
    return new TimeWindowedKStream<K, V>(this.g, settings) as this;
  }

  /** Counts the records of each key and window. */
  count(materialized?: Materialized<number>): KTable<Windowed<K>, number> {
    const fns = { initializer: () => 0, aggregator: countAggregator, merger: null };
    return this.windowed('count', 'KSTREAM-AGGREGATE', materialized, fns);
  }

  /** Combines the values of each key and window. */
  reduce(reducer: (aggregate: V, value: V) => V, materialized?: Materialized<V>): KTable<Windowed<K>, V> {
    const fns = { initializer: () => null, aggregator: reduceAggregator(reducer), merger: null };
    return this.windowed('reduce', 'KSTREAM-REDUCE', materialized, fns);
  }

  /** Folds the values of each key and window. */
  aggregate<A>(
    initializer: () => A,
    aggregator: (key: K, value: V, aggregate: A) => A,
    materialized?: Materialized<A>,
  ): KTable<Windowed<K>, A> {
    const fns = { initializer, aggregator: aggregator as Fn3, merger: null };
    return this.windowed('aggregate', 'KSTREAM-AGGREGATE', materialized, fns);
  }
}

/** A grouped stream in session windows. */
export class SessionWindowedKStream<K, V> extends WindowedStreamBase<K> {
  /** @internal */
  protected copy(settings: WindowSettings): this {
    return new SessionWindowedKStream<K, V>(this.g, settings) as this;
  }

  /** Counts the records of each key and session (merged sessions add their counts). */
  count(materialized?: Materialized<number>): KTable<Windowed<K>, number> {
    const merger: Fn3 = (_k, a, b) => (a as number) + (b as number);
    const fns = { initializer: () => 0, aggregator: countAggregator, merger };
    return this.windowed('count', 'KSTREAM-AGGREGATE', materialized, fns);
  }

  /** Combines the values of each key and session (merged sessions: `reducer(aggregate1, aggregate2)`). */
  reduce(reducer: (aggregate: V, value: V) => V, materialized?: Materialized<V>): KTable<Windowed<K>, V> {
    const aggregator = reduceAggregator(reducer);
    const merger: Fn3 = (k, a, b) => aggregator(k, b, a);
    return this.windowed('reduce', 'KSTREAM-REDUCE', materialized, {
      initializer: () => null,
      aggregator,
      merger,
    });
  }

  /** Folds the values of each key and session; `merger(key, a, b)` joins two sessions a record bridges. */
  aggregate<A>(
    initializer: () => A,
    aggregator: (key: K, value: V, aggregate: A) => A,
    merger: (key: K, aggregate1: A, aggregate2: A) => A,
    materialized?: Materialized<A>,
  ): KTable<Windowed<K>, A> {
    const fns = { initializer, aggregator: aggregator as Fn3, merger: merger as Fn3 };
    return this.windowed('aggregate', 'KSTREAM-AGGREGATE', materialized, fns);
  }
}

/** A table: the latest aggregate per key. */
export class KTable<K, V> {
  /** @internal */
  readonly state: StreamState;

  /** @internal */
  constructor(state: StreamState) {
    this.state = state;
  }

  /** The table's changes as a stream (with caching off: every update, in order). */
  toStream(named?: Named): KStream<K, V> {
    const g = this.state.graph;
    const name = g.nameOr(named?.name, 'KTABLE-TOSTREAM');
    g.add({ kind: 'toStream', name }, [this.state.node]);
    return new KStream<K, V>({ ...this.state, node: name });
  }
}
