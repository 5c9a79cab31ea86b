/**
 * What the DSL's classes (dsl.ts) share besides each other: the option shapes of its operators, the state
 * a stream carries, and the aggregators count and reduce are made of (Kafka Streams' own).
 */
import type { GroupedState, Materialized } from './aggregation.js';
import { DEFAULT_SERDE, type Graph, mustBeFunction } from './graph.js';
import type { Serde } from './serdes.js';
import type { AggregateParams, Fn2, Fn3 } from './types.js';
import type { WindowSpec } from './windows.js';

/** `{ name }`: the node's name (default: generated, Kafka Streams style). */
export interface Named {
  readonly name?: string;
}

/** Serdes of a sink or a grouping (default: the stream's own, JSON after a key or value change). */
export interface Produced<K, V> extends Named {
  readonly key?: Serde<K>;
  readonly value?: Serde<V>;
}

/** How a stream is grouped: the serdes of its repartition topic and store keys, and `name` (the repartition topic is `<applicationId>-<name>-repartition`). */
export type Grouped<K, V> = Produced<K, V>;

/** The state a stream carries besides its node: its serdes and whether its key changed since the source. */
export interface StreamState {
  readonly graph: Graph;
  readonly node: string;
  readonly keySerde: Serde<unknown>;
  readonly valueSerde: Serde<unknown>;
  /** A map, flatMap, selectKey or groupBy changed the key: a stateful step must repartition first. */
  readonly keyChanged: boolean;
}

/** A windowed grouped stream's settings. */
export interface WindowSettings {
  readonly spec: WindowSpec;
  readonly emit: 'update' | 'final';
  readonly onLate: 'dead-letter' | 'drop';
}

/** `fn(value, key)` as the `(key, value)` function a node stores. */
export function flip<A, B, R>(fn: (a: A, b: B) => R): Fn2 {
  return ((k: B, v: A) => fn(v, k)) as Fn2;
}

/** The store's value serde: the one given, else (as Kafka Streams) the stream's for reduce, JSON otherwise. */
export function storeSerde(
  op: AggregateParams['op'],
  m: Materialized<unknown> | undefined,
  g: GroupedState,
): Serde<unknown> {
  return (m?.value as Serde<unknown> | undefined) ?? (op === 'reduce' ? g.valueSerde : DEFAULT_SERDE);
}

export const countAggregator: Fn3 = (_k, _v, a) => (a as number) + 1;

/** Kafka Streams' reduce as an aggregate: the first value (aggregate null), then `reducer(aggregate, value)`. */
export function reduceAggregator<V>(reducer: (aggregate: V, value: V) => V): Fn3 {
  mustBeFunction('reduce', reducer);
  return (_k, v, a) => (a === null || a === undefined ? v : reducer(a as V, v as V));
}
