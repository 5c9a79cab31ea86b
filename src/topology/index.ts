export type { Materialized } from './aggregation.js';
export {
  BranchedKStream,
  KGroupedStream,
  KStream,
  KTable,
  SessionWindowedKStream,
  TimeWindowedKStream,
  WindowedStreamBase,
} from './dsl.js';
export type { Grouped, Named, Produced, Repartitioned } from './dsl-support.js';
export type { WindowBounds } from './model-io.js';
export { type Serde, serdes } from './serdes.js';
export { type Consumed, TopologyBuilder, type TopologyOptions, topology } from './topology.js';
export type {
  AggregateParams,
  BuiltTopology,
  RepartitionSpec,
  SplitBranch,
  StoreSpec,
  SubTopology,
  TopologyEdge,
  TopologyNode,
  Windowed,
} from './types.js';
export { SessionWindows, SlidingWindows, TimeWindows, type WindowSpec, type Windows } from './windows.js';
