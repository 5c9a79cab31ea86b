/**
 * The stateless part of a sub-topology, record by record, as the reference model walks it (depth first,
 * children in the order they were attached): filters, maps, splits, peeks, merges and sinks run here;
 * an aggregation is handed to the caller, which runs it through the key call and then walks on from it.
 */

import type { ModelOutput } from '../model.js';
import type { AggregateNode, ModelRecord } from '../model-io.js';
import { toBytes } from '../serdes.js';
import type { TopologyNode } from '../types.js';
import type { FlowTally } from './flows.js';
import type { RunPlan } from './plan.js';

/** What a walk meets: a sink record (also to a repartition topic), or a record reaching an aggregation. */
export interface WalkSink {
  output(o: ModelOutput): void;
  aggregate(node: AggregateNode, r: ModelRecord): void;
  /** A record a grouping's repartition sink drops: its key is null (its aggregation would drop it). */
  dropNullKey(node: string): void;
  /** Counts each node's records in and out (per-node metrics). */
  readonly tally: FlowTally;
}

/** Walks `r` from node `from` to its children and on. */
export function walkFrom(plan: RunPlan, from: string, r: ModelRecord, to: WalkSink): void {
  for (const child of plan.children.get(from) ?? []) visit(plan, child, r, to);
}

function visit(plan: RunPlan, name: string, r: ModelRecord, to: WalkSink): void {
  const n = plan.byName.get(name) as TopologyNode;
  to.tally.in(name);
  const fwd = (out: ModelRecord) => {
    to.tally.out(name);
    walkFrom(plan, name, out, to);
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
      if (b !== undefined) {
        to.tally.out(name);
        visit(plan, b.name, r, to);
      }
      return;
    }
    case 'sink': {
      // an output topic, or a repartition topic (placed by the key's murmur2 when produced)
      const key = toBytes(n.keySerde, r.key, n.topic);
      const value = toBytes(n.valueSerde, r.value, n.topic);
      // a grouping's repartition drops a null key (its aggregation would); repartition() writes it on
      if (n.internal && n.repartition === null && key === null) to.dropNullKey(n.name);
      else {
        to.tally.out(name);
        to.output({ topic: n.topic, key, value, timestamp: r.timestamp });
      }
      return;
    }
    case 'aggregate':
      // its out: the updates and final results forward.ts walks on from it
      to.aggregate(n, r);
      return;
  }
}
