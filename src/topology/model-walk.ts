/**
 * The reference model's stateless nodes (src/topology/model.ts): what each node kind does to a record
 * before it goes on to the node's children, as Kafka Streams' processors do; a sink and an aggregation
 * are handed back to the model (they write outputs, repartition records and state).
 */
import type { AggregateNode, ModelRecord } from './model-io.js';
import type { TopologyNode } from './types.js';

/** What a node needs of the model: its children, its split branches, its sinks and aggregations. */
export interface ModelSteps<C> {
  /** The node whose code runs (a user function or a serde): the one a throw names. */
  at: string;
  /** Node `from` forwards `r` to its children. */
  forward(from: string, r: ModelRecord, ctx: C): void;
  /** A split hands `r` to one branch. */
  visit(name: string, r: ModelRecord, ctx: C): void;
  sink(n: Extract<TopologyNode, { kind: 'sink' }>, r: ModelRecord, ctx: C): void;
  aggregate(n: AggregateNode, r: ModelRecord, ctx: C): void;
}

/** Node `n` (named `name`) takes `r`. */
export function visitNode<C>(m: ModelSteps<C>, n: TopologyNode, name: string, r: ModelRecord, ctx: C): void {
  m.at = name;
  const fwd = (out: ModelRecord) => {
    m.forward(name, out, ctx);
    m.at = name; // a flatMap's iterable runs again after its records' walks
  };
  switch (n.kind) {
    case 'source':
      return;
    case 'filter':
      if (Boolean(n.predicate(r.key, r.value)) !== n.not) fwd(r);
      return;
    case 'map': {
      const [key, value] = n.mapper(r.key, r.value) as readonly [unknown, unknown];
      fwd({ key, value, timestamp: r.timestamp });
      return;
    }
    case 'mapValues':
      fwd({ ...r, value: n.mapper(r.key, r.value) });
      return;
    case 'selectKey':
      fwd({ ...r, key: n.mapper(r.key, r.value) });
      return;
    case 'flatMap':
      for (const [key, value] of n.mapper(r.key, r.value) as Iterable<readonly [unknown, unknown]>)
        fwd({ key, value, timestamp: r.timestamp });
      return;
    case 'flatMapValues':
      for (const value of n.mapper(r.key, r.value) as Iterable<unknown>) fwd({ ...r, value });
      return;
    case 'peek':
      n.action(r.key, r.value);
      fwd(r);
      return;
    case 'branch':
    case 'merge':
    case 'toStream':
      fwd(r);
      return;
    case 'split': {
      const b = n.branches.find((x) => x.predicate === null || Boolean(x.predicate(r.key, r.value)));
      if (b !== undefined) m.visit(b.name, r, ctx);
      return;
    }
    case 'sink':
      m.sink(n, r, ctx);
      return;
    case 'aggregate':
      m.aggregate(n, r, ctx);
      return;
  }
}
