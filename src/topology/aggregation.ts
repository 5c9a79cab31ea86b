/**
 * Adds an aggregation to the graph: the store's name, the repartition topic when the key changed since
 * the source (automatic, as in Kafka Streams: `<applicationId>-<name>-repartition`, the grouping's name
 * or else the store's; a named grouping's topic is written once and read by each of its aggregations),
 * and the aggregate node itself.
 */
import { type Graph, mustBeFunction } from './graph.js';
import type { Serde } from './serdes.js';
import type { AggregateParams } from './types.js';

/** What a grouped stream holds: where it hangs in the graph, its serdes, and its grouping name. */
export interface GroupedState {
  readonly graph: Graph;
  readonly node: string;
  readonly keySerde: Serde<unknown>;
  readonly valueSerde: Serde<unknown>;
  readonly keyChanged: boolean;
  readonly groupName: string | undefined;
}

/** `{ name }`: the store's name (default generated), `value`: the store's value serde (default JSON). */
export interface Materialized<V> {
  readonly name?: string;
  readonly value?: Serde<V>;
}

export type AggregateRequest = Omit<AggregateParams, 'store' | 'keySerde'> & {
  readonly prefix: 'KSTREAM-AGGREGATE' | 'KSTREAM-REDUCE';
  readonly storeName: string | undefined;
};

/** Adds the nodes; returns the aggregate node's name. */
export function addAggregate(g: GroupedState, req: AggregateRequest): string {
  mustBeFunction(req.op, req.initializer);
  mustBeFunction(req.op, req.aggregator);
  if (req.merger !== null) mustBeFunction(req.op, req.merger);
  const graph = g.graph;
  const store = req.storeName ?? graph.newName(`${req.prefix}-STATE-STORE`);
  let parent = g.node;
  if (g.keyChanged) {
    const topic = `${graph.applicationId}-${g.groupName ?? store}-repartition`;
    // the names are taken even when not used, as Kafka Streams burns them, so later generated names match
    const sink = graph.newName('KSTREAM-SINK');
    const source = graph.newName('KSTREAM-SOURCE');
    // Kafka Streams: a named grouping's repartition topic is written once and read by every aggregation
    // of the grouped stream; an unnamed one gets a topic per aggregation, named after its store
    const id = `${g.node}\u0000${topic}`;
    const shared = g.groupName === undefined ? undefined : graph.groupedSources.get(id);
    if (shared !== undefined) parent = shared;
    else {
      const serdes = { keySerde: g.keySerde, valueSerde: g.valueSerde };
      graph.add({ kind: 'sink', name: sink, topic, ...serdes, internal: true, repartition: null }, [parent]);
      graph.add(
        { kind: 'source', name: source, topics: [topic], pattern: null, ...serdes, internal: true },
        [],
      );
      graph.groupedSources.set(id, source);
      parent = source;
    }
  }
  const { prefix, storeName: _, ...params } = req;
  const name = graph.newName(prefix);
  graph.add({ kind: 'aggregate', name, ...params, store, keySerde: g.keySerde }, [parent]);
  return name;
}
