/**
 * The batch executor's last step: per record again, in order, the key calls' results forwarded down the
 * graph from their aggregation (toStream, filters, maps, sinks): updates (APPLY, REBASE, REEMIT), final
 * results, a session's tombstones and merged session, or its lateness; outputs, drops and dead letters
 * in the model's order. SKIP gives nothing, REJECT a dead letter.
 *
 * A node that throws while one update or final result is walked on (downstream of the aggregation: the
 * batch's state is written by then) takes that walk's outputs and drops back, all of them, and its
 * record becomes a dead letter marked `stateApplied` (once, after the record's other steps: the first
 * throw's node); the record's other updates and the batch go on. A replay (REEMIT) walks the same
 * pending results and throws the same way.
 */
import { RedfenceError } from '../../errors/index.js';
import type { EffectResult, KeyRecordResult } from '../../store/index.js';
import type { ModelDrop, ModelErrorDeadLetter, ModelSource } from '../model.js';
import { type ModelRecord, withHeaders } from '../model-io.js';
import { nodeThrew, STORED, StoredUnreadable } from '../threw.js';
import { finalUpdate, sessionOutcome, slidingOutcome, updateCount, updateOf } from './arrive.js';
import type { FlowTally } from './flows.js';
import { partResult } from './note.js';
import type { RunPlan } from './plan.js';
import { lateStep, type Placed, type PlacedStep } from './steps.js';
import type {
  RejectedDeadLetter,
  TopologyBatch,
  TopologyDeadLetter,
  TopologyOutput,
  VerdictCounts,
} from './types.js';
import { children, flowOf, type GraphNode, graphNode, type WalkSink } from './walk.js';

export type Verdicts = Record<keyof VerdictCounts, number>;

export interface ForwardContext {
  readonly plan: RunPlan;
  /** Each key group's results, by its index (KeyGroup.index). */
  readonly replies: readonly (readonly KeyRecordResult[] | undefined)[];
  readonly outputs: TopologyOutput[];
  readonly deadLetters: TopologyDeadLetter[];
  readonly dropped: ModelDrop[];
  readonly verdicts: Verdicts;
  /** Each node's records in and out (the aggregation's out: the updates and final results walked on). */
  readonly tally: FlowTally;
}

/** The walk's sink of a forwarded step: `source` is the step's input record (one sink per batch). */
class ForwardSink implements WalkSink {
  source: ModelSource | null = null;
  /** A session window's updates: walked on without the record's headers, as Kafka Streams forwards them. */
  bare = false;
  at = '';
  /** The current record's dead letter: a node downstream of an aggregation threw on it (walkOn). */
  threw: ModelErrorDeadLetter | null = null;
  readonly tally: FlowTally;
  readonly #ctx: ForwardContext;

  constructor(ctx: ForwardContext) {
    this.#ctx = ctx;
    this.tally = ctx.tally;
  }

  output(topic: string, key: Buffer | null, value: Buffer | null, timestamp: number): void {
    const source = this.source as ModelSource;
    const out = { topic, key, value, timestamp, offset: source.offset };
    this.#ctx.outputs.push(this.bare ? out : withHeaders(out, source.headers));
  }

  aggregate(): void {
    throw new TypeError('planTopology refused an aggregation downstream of another');
  }

  dropNullKey(name: string): void {
    this.#ctx.dropped.push({ reason: 'null-key', node: name, source: this.source as ModelSource });
  }

  /**
   * The current record's downstream dead letter, if any, after its other steps; or, when a key call
   * REJECTed it too, its one dead letter (`rejected`) marked with the state its other keys applied and
   * the downstream throw (docs/streams.md, "A record refused and thrown on").
   */
  flush(): void {
    const rejected = this.rejected;
    this.rejected = null;
    if (rejected !== null) {
      const { i, dead, applied } = rejected;
      const threw = this.threw;
      this.threw = null;
      if (threw === null && !applied) return;
      const downstream =
        threw === null
          ? {}
          : {
              downstream: {
                node: threw.node,
                downstreamOf: threw.downstreamOf as string,
                error: threw.error,
              },
            };
      this.#ctx.deadLetters[i] = { ...dead, stateApplied: true, ...downstream };
      return;
    }
    if (this.threw === null) return;
    this.#ctx.deadLetters.push(this.threw);
    this.threw = null;
  }

  /** The current record's REJECT dead letter (its index) and whether another of its key records applied. */
  rejected: { i: number; dead: RejectedDeadLetter; applied: boolean } | null = null;
  /** Whether the current record applied state on some key before its REJECT was seen. */
  applied = false;
  /** The input offset of the steps being forwarded. */
  offset = -1;

  #lastName = '';
  #lastNode: GraphNode | undefined;

  /** Aggregation `name`'s graph node (the last one asked kept: a batch's updates mostly come from one). */
  graphNode(name: string): GraphNode | undefined {
    if (name !== this.#lastName || this.#lastNode === undefined) {
      this.#lastNode = graphNode(this.#ctx.plan, name);
      this.#lastName = name;
    }
    return this.#lastNode;
  }
}

/**
 * Forwards the placed steps, in order. The batch's state is written by now: a throw downstream of an
 * aggregation makes its record a dead letter, its state kept ({@link walkOn}); a store serde that
 * cannot read a result fails the batch with RF_TOPOLOGY_NODE_THREW.
 */
export function forwardSteps(steps: readonly PlacedStep[], ctx: ForwardContext, topic: string): void {
  const sink = new ForwardSink(ctx);
  for (const step of steps) {
    // a record's downstream dead letter comes after its other steps (the model's order)
    if (offsetOf(step) !== sink.offset) {
      sink.flush();
      sink.offset = offsetOf(step);
      sink.applied = false;
    }
    sink.at = '';
    try {
      forwardStep(step, ctx, sink);
    } catch (error) {
      if (error instanceof RedfenceError) throw error;
      const source = 'source' in step ? step.source : null;
      if (source === null) throw error;
      const node =
        'arrival' in step ? step.arrival.agg.node.name : 'closes' in step ? step.closes.node.name : '';
      const at = { topic, partition: source.partition, offset: source.offset };
      if (error instanceof StoredUnreadable) throw nodeThrew(node, at, error.error, STORED);
      // walkOn makes a throw of the walk on a dead letter: what is left is the aggregation's reading of its results
      throw nodeThrew(node, at, error, 'reading its results');
    }
  }
  sink.flush();
}

/** The input offset a placed step belongs to. */
function offsetOf(step: PlacedStep): number {
  if ('out' in step) return step.out.offset;
  if ('drop' in step) return step.drop.source.offset;
  if ('dead' in step) return step.dead.source.offset;
  return step.source.offset;
}

/**
 * An update (or final result) of aggregation `node` walked on from it: all or nothing. A throw takes
 * back the outputs and drops this walk made (a repartition record too) and makes the record a dead
 * letter once; the state the update came from stays.
 */
function walkOn(ctx: ForwardContext, node: string, u: ModelRecord, sink: ForwardSink): void {
  const g = sink.graphNode(node);
  if (g === undefined) ctx.tally.out(node);
  else flowOf(g, ctx.tally).out++;
  const outputs = ctx.outputs.length;
  const dropped = ctx.dropped.length;
  sink.at = '';
  try {
    if (g !== undefined) children(g, u, sink);
  } catch (error) {
    if (error instanceof StoredUnreadable) throw error;
    ctx.outputs.length = outputs;
    ctx.dropped.length = dropped;
    const source = sink.source as ModelSource;
    sink.threw ??= {
      reason: 'processing-error',
      node: sink.at || node,
      error,
      source,
      stateApplied: true,
      downstreamOf: node,
    };
  }
}

/** Forwards one placed step. */
export function forwardStep(step: PlacedStep, ctx: ForwardContext, sink = new ForwardSink(ctx)): void {
  if ('out' in step) {
    ctx.outputs.push(step.out);
    return;
  }
  if ('drop' in step) {
    ctx.dropped.push(step.drop);
    return;
  }
  if ('dead' in step) {
    ctx.deadLetters.push(step.dead);
    return;
  }
  const node = 'arrival' in step ? step.arrival.agg.node : step.closes.node;
  sink.source = step.source;
  if ('arrival' in step) {
    const results = resultsOf(step.placed, step.source, ctx, sink);
    if (results === null) return;
    // its own state changes on this key were made (a window it closes elsewhere is not its state)
    sink.applied = true;
    if (sink.rejected !== null) sink.rejected.applied = true;
    const final = node.emit === 'final' && node.window !== null;
    if (step.arrival.sliding) {
      // as the model: the window updates (emit final: none), then the windows the record was too late for
      const o = slidingOutcome(step.arrival, results);
      if (!final) for (const u of o.updates) walkOn(ctx, node.name, u, sink);
      if (o.missed.length > 0) {
        const late = lateStep(node, o.missed, step.source);
        if ('drop' in late) ctx.dropped.push(late.drop);
        else ctx.deadLetters.push(late.dead);
      }
      return;
    }
    if (final && step.arrival.session === null) return;
    if (step.arrival.session === null) {
      const n = updateCount(step.arrival);
      for (let i = 0; i < n; i++) walkOn(ctx, node.name, updateOf(step.arrival, results, i), sink);
      return;
    }
    const o = sessionOutcome(step.arrival, results[0]);
    if ('late' in o) {
      const late = lateStep(node, [o.late], step.source);
      if ('drop' in late) ctx.dropped.push(late.drop);
      else ctx.deadLetters.push(late.dead);
    } else if (!final) {
      sink.bare = true;
      try {
        for (const u of o.updates) walkOn(ctx, node.name, u, sink);
      } finally {
        sink.bare = false;
      }
    }
    return;
  }
  for (const { window, placed } of step.windows) {
    const results = resultsOf(placed, step.source, ctx, sink);
    const u = results === null ? null : finalUpdate(step.closes, window, results);
    if (u !== null) walkOn(ctx, node.name, u, sink);
  }
}

/**
 * The results of some placed effects, or null (SKIP, REJECT). The key record's first placement counts
 * its verdict and reports its dead letter.
 */
function resultsOf(
  placed: Placed,
  source: TopologyBatch['records'][number],
  ctx: ForwardContext,
  sink: ForwardSink,
): readonly EffectResult[] | null {
  const { group, record, part } = placed;
  const r = ctx.replies[group.index]?.[record];
  const kr = group.records[record];
  if (r === undefined || kr === undefined || r.offset !== kr.offset)
    throw new RedfenceError('RF_BAD_REPLY', 'topology batch: a key call answered for other records');
  if (r.verdict === 'CONFLICT')
    throw new RedfenceError('RF_BAD_REPLY', 'topology batch: CONFLICT left after the read-then-write rounds');
  const once = part === 0;
  if (once && r.verdict !== 'FENCE') ctx.verdicts[r.verdict]++;
  if (r.verdict === 'REJECT' || (r.verdict === 'REEMIT' && 'deadLetter' in r)) {
    const message = r.verdict === 'REJECT' ? r.reason : (r as { deadLetter: string }).deadLetter;
    const store = ctx.plan.aggregates.get(kr.node)?.node.store ?? '';
    if (once && sink.rejected === null) {
      const dead: RejectedDeadLetter = { reason: 'rejected', node: kr.node, store, message, source };
      sink.rejected = { i: ctx.deadLetters.length, dead, applied: sink.applied };
      ctx.deadLetters.push(dead);
    }
    return null;
  }
  if (r.verdict === 'SKIP' || r.verdict === 'FENCE') return null;
  return partResult(kr, r.results ?? [], part);
}
