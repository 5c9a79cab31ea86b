/**
 * The topology processor's per-node metrics (docs/streams.md, "Metrics"): each batch's records in and
 * out per node (counted by the executor's walk, src/topology/run/flows.ts), its late records per
 * windowed aggregation and its drops per node and reason, kept beside the queued batch and added to the
 * metrics when that batch commits: a batch run again after a failed Kafka step, an outage or a crash is
 * counted once, when it commits. A handful of metric calls per node and committed batch, none per record.
 */
import type { RedfenceMetrics, TopologyDropReason } from '../../metrics/index.js';
import type { NodeFlows } from '../../topology/run/flows.js';
import type { RunPlan } from '../../topology/run/plan.js';
import type { TopologyBatchResult } from '../../topology/run/types.js';
import type { QueuedBatch } from '../commit-pipeline.js';

interface BatchNodes {
  readonly flows: NodeFlows;
  /** By node: late records. */
  readonly late: Map<string, number>;
  /** By node and reason: `<reason> <node>` -> dropped records. */
  readonly dropped: Map<string, { node: string; reason: TopologyDropReason; n: number }>;
  /** Ticks among the batch's records (they walk no node). */
  readonly ticks: number;
}

export class NodeMetrics {
  readonly #metrics: RedfenceMetrics | undefined;
  readonly #app: string;
  /** Queued batches' counts until their commit (a batch dropped from the queue is never counted). */
  readonly #pending = new WeakMap<QueuedBatch, BatchNodes>();

  constructor(metrics: RedfenceMetrics | undefined, plan: RunPlan) {
    this.#metrics = metrics;
    this.#app = plan.built.applicationId;
    if (metrics === undefined) return;
    const repartition = new Map<string, string>();
    for (const sub of plan.subs.values())
      if (sub.internal) for (const s of sub.sources) repartition.set(sub.topic, s.name);
    metrics.topology({
      application: this.#app,
      nodes: plan.built.nodes.map((n) => n.name),
      windowed: [...plan.aggregates.values()].filter((a) => a.node.window !== null).map((a) => a.node.name),
      repartition,
    });
  }

  /** A batch queued for its Kafka step, with the executor's result and how many of its records are ticks. */
  queued(batch: QueuedBatch, result: TopologyBatchResult, ticks: number): void {
    if (this.#metrics === undefined) {
      if (ticks > 0)
        this.#pending.set(batch, { flows: new Map(), late: new Map(), dropped: new Map(), ticks });
      return;
    }
    const late = new Map<string, number>();
    const dropped: BatchNodes['dropped'] = new Map();
    for (const d of result.deadLetters)
      if (d.reason === 'late') late.set(d.node, (late.get(d.node) ?? 0) + 1);
    for (const d of result.dropped) {
      if (d.reason === 'late') late.set(d.node, (late.get(d.node) ?? 0) + 1);
      const id = `${d.reason} ${d.node}`;
      const had = dropped.get(id);
      if (had === undefined) dropped.set(id, { node: d.node, reason: d.reason, n: 1 });
      else had.n++;
    }
    this.#pending.set(batch, { flows: result.nodes, late, dropped, ticks });
  }

  /** A batch's Kafka step committed it. Returns how many of its records were ticks. */
  committed(batch: QueuedBatch): number {
    const m = this.#metrics;
    const b = this.#pending.get(batch);
    if (b === undefined) return 0;
    this.#pending.delete(batch);
    if (m === undefined) return b.ticks;
    m.topologyTicks(this.#app, 'consumed', b.ticks);
    for (const [node, f] of b.flows) m.topologyNode(this.#app, node, f.in, f.out);
    for (const [node, n] of b.late) m.topologyLate(this.#app, node, n);
    for (const d of b.dropped.values()) m.topologyDropped(this.#app, d.node, d.reason, d.n);
    return b.ticks;
  }
}
