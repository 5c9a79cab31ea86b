/**
 * `topology()`: the entry of the streams DSL. Sources make streams; `build()` checks the whole graph
 * and returns its immutable description.
 */
import { RedfenceError } from '../errors/index.js';
import { checkAndBuild } from './build.js';
import { KStream } from './dsl.js';
import { DEFAULT_SERDE, Graph } from './graph.js';
import { isSerde, type Serde } from './serdes.js';
import type { BuiltTopology } from './types.js';

export interface TopologyOptions {
  /** Names the application: its repartition topics (`<applicationId>-<name>-repartition`) and, when run, its Redis keys. `[A-Za-z0-9._-]{1,100}`. */
  readonly applicationId: string;
}

/** A source's serdes (default JSON) and node name. */
export interface Consumed<K, V> {
  readonly key?: Serde<K>;
  readonly value?: Serde<V>;
  readonly name?: string;
}

export class TopologyBuilder {
  private readonly graph: Graph;

  /** @internal */
  constructor(options: TopologyOptions) {
    const id = (options as Partial<TopologyOptions> | undefined)?.applicationId;
    if (typeof id !== 'string' || !/^[A-Za-z0-9._-]{1,100}$/.test(id)) {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        'topology: applicationId must be 1-100 characters of [A-Za-z0-9._-]',
      );
    }
    this.graph = new Graph(id);
  }

  /**
   * A stream of one topic, several topics, or every topic a pattern matches as a whole (as Kafka
   * Streams matches: `/orders-.*\/` reads `orders-eu`, not `old-orders-eu`).
   */
  stream<K = unknown, V = unknown>(
    topics: string | readonly string[] | RegExp,
    consumed?: Consumed<K, V>,
  ): KStream<K, V> {
    const g = this.graph;
    const list = typeof topics === 'string' ? [topics] : topics instanceof RegExp ? null : [...topics];
    if (list !== null && (list.length === 0 || list.some((t) => typeof t !== 'string' || t === ''))) {
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'stream: topics must be non-empty topic names');
    }
    for (const s of [consumed?.key, consumed?.value]) {
      if (s !== undefined && !isSerde(s))
        throw new RedfenceError('RF_INVALID_ARGUMENT', 'stream: a serde has serialize and deserialize');
    }
    const keySerde = (consumed?.key as Serde<unknown> | undefined) ?? DEFAULT_SERDE;
    const valueSerde = (consumed?.value as Serde<unknown> | undefined) ?? DEFAULT_SERDE;
    const name = g.nameOr(consumed?.name, 'KSTREAM-SOURCE');
    // Kafka Streams matches the whole topic name (Pattern.matcher(topic).matches()); a global or sticky
    // flag would make test() remember where it stopped
    const pattern =
      topics instanceof RegExp
        ? new RegExp(`^(?:${topics.source})$`, topics.flags.replace(/[gy]/g, ''))
        : null;
    g.add({ kind: 'source', name, topics: list, pattern, keySerde, valueSerde, internal: false }, []);
    return new KStream<K, V>({ graph: g, node: name, keySerde, valueSerde, keyChanged: false });
  }

  /** Checks the topology (RF_TOPOLOGY_INVALID naming the node) and returns its immutable description. */
  build(): BuiltTopology {
    return checkAndBuild(this.graph);
  }
}

/**
 * Starts a topology.
 *
 * @example
 * const t = topology({ applicationId: 'fraud' });
 * t.stream<string, { amount: number }>('orders', { key: serdes.string() })
 *   .filter((_k, o) => o.amount > 100)
 *   .groupByKey()
 *   .windowedBy(TimeWindows.ofSizeAndGrace(300_000, 10_000))
 *   .count()
 *   .toStream()
 *   .filter((_wk, n) => n > 10)
 *   .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, count: n }])
 *   .to('fraud-alerts', { key: serdes.string() });
 * const built = t.build();
 */
export function topology(options: TopologyOptions): TopologyBuilder {
  return new TopologyBuilder(options);
}
