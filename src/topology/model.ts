/**
 * The reference model of a topology's semantics: a pure, deterministic interpreter of a built topology
 * over a list of input records. It follows Kafka Streams 4.x with caching off (every table update is
 * forwarded) and the emit interval of final results at 0 (checked at every record); stream time is kept
 * per aggregation processor and task (a task: one sub-topology's input partition), as Kafka Streams keeps
 * it. Its own rule beyond Kafka Streams: a late record comes back as a dead letter (reason `late`) with
 * the windows it missed, unless the aggregation says `onLate('drop')`. docs/streams.md says where the
 * model differs and why. The Redis execution is checked against it.
 */
import { RedfenceError } from '../errors/index.js';
import { murmur2, toPositive } from '../partitioner/index.js';
import {
  Failures,
  isModelThrow,
  RunFails,
  recordId,
  StepThrew,
  type Threw,
  WalkThrow,
} from './model-failures.js';
import {
  type AggIO,
  type AggregateNode,
  checkInput,
  type ModelRecord,
  storeKey,
  withHeaders,
} from './model-io.js';
import { Placement } from './model-placement.js';
import { SessionAggregate } from './model-session.js';
import { SlidingAggregate } from './model-sliding.js';
import type {
  ModelDeadLetter,
  ModelDrop,
  ModelErrorDeadLetter,
  ModelInput,
  ModelMisplaced,
  ModelOptions,
  ModelOutput,
  ModelResult,
  ModelSource,
} from './model-types.js';
import { type ModelSteps, visitNode } from './model-walk.js';
import { TableAggregate, TimeWindowAggregate } from './model-window.js';
import { readsTopic } from './patterns.js';
import { fromBytes, toBytes } from './serdes.js';
import { nodeThrew, STORED, StoredUnreadable } from './threw.js';
import { isTick, tickSource, windowedAggregations } from './tick.js';
import type { BuiltTopology, TopologyNode } from './types.js';

export type {
  ModelDeadLetter,
  ModelDrop,
  ModelErrorDeadLetter,
  ModelHeaders,
  ModelInput,
  ModelMisplaced,
  ModelOptions,
  ModelOutput,
  ModelResult,
  ModelSource,
  WindowBounds,
} from './model-types.js';

interface Aggregator {
  process(r: ModelRecord): void;
  /** A tick (tick.ts): windowed aggregations only. */
  tick?(timestamp: number): void;
}

/**
 * What a record carries through a task: the task's partition and the record that entered it; `bare`
 * for a session window's updates, which carry no headers; `path` names the record (model-failures.ts)
 * and `forwards` counts its updates and final results per aggregation (each one's name: `<path>><agg>#<n>`).
 */
interface Ctx {
  readonly partition: number;
  readonly source: ModelSource;
  readonly bare?: true;
  readonly path: string;
  readonly forwards: Map<string, number>;
}

class Run implements ModelSteps<Ctx> {
  private readonly byName = new Map<string, TopologyNode>();
  private readonly children = new Map<string, string[]>();
  private readonly subOf = new Map<string, number>();
  private readonly aggregators = new Map<string, Aggregator>();
  private readonly repartitionOffsets = new Map<string, number>();
  readonly outputs: ModelOutput[] = [];
  readonly deadLetters: ModelDeadLetter[] = [];
  readonly failed: ModelErrorDeadLetter[] = [];
  readonly misplaced: ModelMisplaced[] = [];
  readonly dropped: ModelDrop[] = [];
  private readonly placement: Placement;

  /** The node whose code runs (a user function or a serde): the one a throw names. */
  at = '';
  /**
   * The first throw of an aggregation's own code while the current record is walked (`stored`: its
   * serde reading stored state), kept until its walk is over: on Redis every fold comes after the walk
   * (run/executor.ts), so a later throw of the walk wins. A throw of the walk itself, or downstream of
   * an aggregation, starts a new try at once.
   */
  private threw: Threw = { fold: null };
  /** Where a repartition record is written: the record's walk or one of its steps (its path), and how many so far. */
  private scope = { path: '', takes: 0 };

  constructor(
    private readonly built: BuiltTopology,
    private readonly partitions: Map<string, number>,
    /** What the earlier tries learned: dead letters, and the updates not walked on (model-failures.ts). */
    private readonly book: Failures,
    /** The input topics whose partition count was given: partition-checked (ModelOptions.partitions). */
    counted: ReadonlySet<string>,
  ) {
    for (const n of built.nodes) this.byName.set(n.name, n);
    for (const e of built.edges) this.children.set(e.from, [...(this.children.get(e.from) ?? []), e.to]);
    for (const s of built.subTopologies) for (const n of s.nodes) this.subOf.set(n, s.id);
    this.placement = new Placement(built, counted);
  }

  /** The sources reading a topic (external sources by name or pattern; internal ones by name). */
  private sourcesOf(topic: string, internal: boolean): TopologyNode[] {
    return this.built.nodes.filter(
      (n) => n.kind === 'source' && n.internal === internal && readsTopic(n, topic),
    );
  }

  input(rec: ModelInput): void {
    if (isTick(rec)) {
      this.tick(rec);
      return;
    }
    const sources = this.sourcesOf(rec.topic, false);
    if (sources.length === 0) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `runModel: no source of the topology reads ${rec.topic}`,
      );
    }
    this.take(rec, sources, recordId(rec));
  }

  /**
   * A record entering its task through `sources`: a dead letter if its walk threw before (runModel runs
   * again without it: all or nothing), else walked; a throw of its walk becomes a WalkThrow naming it.
   * A walk on of one of its updates that throws downstream: a StepThrew (run again without it, its
   * state kept); in the try without them, its dead letter comes after what the record made.
   */
  private take(rec: ModelInput, sources: readonly TopologyNode[], path: string, ticking = false): void {
    const misplaced = this.placement.check(rec, sources, this.partitions.get(rec.topic));
    if (misplaced !== null) {
      // never walked: none of its effects, no function of yours called on it
      this.misplaced.push(misplaced);
      return;
    }
    const dead = this.book.dead(path);
    if (dead !== undefined) {
      this.failed.push({ reason: 'processing-error', node: dead.node, error: dead.error, source: rec });
      return;
    }
    const outer = this.threw;
    const scope = this.scope;
    const threw: Threw = { fold: null };
    const forwards = new Map<string, number>();
    this.threw = threw;
    this.scope = { path, takes: 0 };
    try {
      if (ticking) this.ticked(sources, rec, path, forwards);
      else for (const s of sources) this.enter(s, rec, path, forwards);
    } catch (error) {
      if (isModelThrow(error)) throw error;
      throw new WalkThrow(path, this.at, error);
    } finally {
      this.threw = outer;
      this.scope = scope;
    }
    const { fold } = threw;
    if (fold?.stored === true) throw new RunFails(nodeThrew(fold.node, rec, fold.error, STORED));
    // its aggregation's own code: a dead letter, all or nothing (nothing of the batch is written yet)
    if (fold !== null) throw new WalkThrow(path, fold.node, fold.error);
    const applied = this.book.applied(path, rec);
    if (applied !== null) this.failed.push(applied);
  }

  /**
   * A tick (tick.ts) of an input topic or of a repartition topic (the one record the model takes from a
   * repartition topic: it gets the next offset of the model's own in that partition). Not walked: each
   * windowed aggregation of the sub-topology reading the topic takes it as a record that updates no
   * window; what it closes carries none of its headers.
   */
  private tick(rec: ModelInput): void {
    const external = this.sourcesOf(rec.topic, false);
    const sources = external.length > 0 ? external : this.sourcesOf(rec.topic, true);
    if (sources.length === 0)
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `runModel: no source of the topology reads ${rec.topic}`,
      );
    let tick: ModelInput = tickSource(rec);
    if (external.length === 0) {
      const slot = `${rec.topic}:${rec.partition}`;
      const offset = this.repartitionOffsets.get(slot) ?? 0;
      this.repartitionOffsets.set(slot, offset + 1);
      tick = { ...tick, offset };
    }
    this.take(tick, sources, recordId(tick), true);
  }

  /** A tick's walk: each windowed aggregation of its sub-topology, in node order, moved to its time. */
  private ticked(
    sources: readonly TopologyNode[],
    rec: ModelInput,
    path: string,
    forwards: Map<string, number>,
  ): void {
    const sub = this.subOf.get(sources[0]?.name as string);
    const ctx: Ctx = { partition: rec.partition, source: rec, path, forwards };
    for (const n of windowedAggregations(this.built)) {
      if (this.subOf.get(n.name) !== sub) continue;
      const outer = this.current;
      this.current = ctx;
      this.at = n.name;
      try {
        this.aggregatorFor(n, ctx).tick?.(rec.timestamp);
      } catch (error) {
        // a final result's walk on threw (StepThrew), or its store serde cannot read what it stored
        if (error instanceof StoredUnreadable)
          throw new RunFails(nodeThrew(n.name, rec, error.error, STORED));
        throw error;
      } finally {
        this.current = outer;
      }
    }
  }

  private enter(source: TopologyNode, rec: ModelInput, path: string, forwards: Map<string, number>): void {
    if (source.kind !== 'source') return;
    this.at = source.name;
    const ctx: Ctx = { partition: rec.partition, source: rec, path, forwards };
    const key = fromBytes(source.keySerde, rec.key, rec.topic);
    const value = fromBytes(source.valueSerde, rec.value, rec.topic);
    this.forward(source.name, { key, value, timestamp: rec.timestamp }, ctx);
  }

  /** Part of ModelSteps: node `from` forwards `r` to its children. */
  forward(from: string, r: ModelRecord, ctx: Ctx): void {
    for (const child of this.children.get(from) ?? []) this.visit(child, r, ctx);
  }

  /** Part of ModelSteps (model-walk.ts): node `name` takes `r`. */
  visit(name: string, r: ModelRecord, ctx: Ctx): void {
    visitNode(this, this.byName.get(name) as TopologyNode, name, r, ctx);
  }

  /** Part of ModelSteps: a record reaching an aggregation. */
  aggregate(n: AggregateNode, r: ModelRecord, ctx: Ctx): void {
    // its key serde runs in the walk (on Redis the walk makes the fence key): a throw is the walk's
    if (r.key !== null) storeKey(n, r.key);
    const outer = this.current;
    this.current = ctx;
    try {
      this.aggregatorFor(n, ctx).process(r);
    } catch (error) {
      // a record of another task that threw in its own walk (a repartition) stays that record's
      if (isModelThrow(error)) throw error;
      // its own code (initializer, aggregator, merger, store serde): the record's fate once walked
      const stored = error instanceof StoredUnreadable;
      this.threw.fold ??= { node: n.name, error: stored ? error.error : error, stored };
    } finally {
      this.current = outer;
    }
  }

  /** Part of ModelSteps: a sink writes `r` (an output, or a repartition record taken at once). */
  sink(n: Extract<TopologyNode, { kind: 'sink' }>, r: ModelRecord, ctx: Ctx): void {
    const key = toBytes(n.keySerde, r.key, n.topic);
    const value = toBytes(n.valueSerde, r.value, n.topic);
    const headers = ctx.bare === true ? undefined : ctx.source.headers;
    if (!n.internal) {
      this.outputs.push(withHeaders({ topic: n.topic, key, value, timestamp: r.timestamp }, headers));
      return;
    }
    if (key === null && n.repartition === null) {
      // a grouping's repartition: its aggregation would drop the record
      this.dropped.push({ reason: 'null-key', node: n.name, source: ctx.source });
      return;
    }
    // a record whose aggregation threw is a dead letter once walked: what it would repartition never is
    if (this.threw.fold !== null) return;
    // a null key through repartition(): any partition in Kafka Streams (the producer's choice); here the first
    const partition =
      key === null ? 0 : toPositive(murmur2(key)) % this.placement.repartitionCount(n, this.partitions);
    const slot = `${n.topic}:${partition}`;
    const offset = this.repartitionOffsets.get(slot) ?? 0;
    this.repartitionOffsets.set(slot, offset + 1);
    const rec = withHeaders(
      { topic: n.topic, partition, offset, key, value, timestamp: r.timestamp },
      headers,
    );
    // named by where it was written (its offset moves when an earlier one is not written)
    const path = `${this.scope.path}>${n.name}#${this.scope.takes++}`;
    this.take(rec, this.sourcesOf(n.topic, true), path);
  }

  private aggregatorFor(n: AggregateNode, ctx: Ctx): Aggregator {
    const id = `${n.name}#${ctx.partition}`;
    let agg = this.aggregators.get(id);
    if (agg === undefined) {
      agg = this.makeAggregator(n);
      this.aggregators.set(id, agg);
    }
    return agg;
  }

  /** The record an aggregator is processing (set around its call, restored after: calls nest through repartitions). */
  private current: Ctx | null = null;

  private makeAggregator(n: AggregateNode): Aggregator {
    const io: AggIO = {
      node: n,
      forward: (key, value, timestamp, bare) => {
        const ctx = this.ctx();
        const nth = ctx.forwards.get(n.name) ?? 0;
        ctx.forwards.set(n.name, nth + 1);
        const step = `${ctx.path}>${n.name}#${nth}`;
        // its walk on threw in an earlier try: none of it is made (the state it came from stays)
        if (this.book.skipped(step)) return;
        const scope = this.scope;
        this.scope = { path: step, takes: 0 };
        try {
          this.forward(n.name, { key, value, timestamp }, bare === true ? { ...ctx, bare } : ctx);
        } catch (error) {
          // another task's record (a repartition), or a run failing already: theirs
          if (isModelThrow(error)) throw error;
          throw new StepThrew(ctx.path, { step, agg: n.name, node: this.at, error });
        } finally {
          this.scope = scope;
        }
      },
      late: (windows) => {
        const source = this.ctx().source;
        if (n.onLate === 'drop') this.dropped.push({ reason: 'late', node: n.name, source });
        else this.deadLetters.push({ reason: 'late', node: n.name, store: n.store, windows, source });
      },
      drop: (reason) => this.dropped.push({ reason, node: n.name, source: this.ctx().source }),
    };
    if (n.window === null) return new TableAggregate(io);
    if (n.window.kind === 'session') return new SessionAggregate(io);
    if (n.window.kind === 'sliding') return new SlidingAggregate(io);
    return new TimeWindowAggregate(io);
  }

  private ctx(): Ctx {
    return this.current as Ctx;
  }
}

/**
 * Runs a built topology over input records and returns what its sinks write, its dead letters (late
 * records) and the records it dropped. Pure and deterministic: the same input gives the same result.
 *
 * @example
 * const result = runModel(built, [
 *   { topic: 'orders', partition: 0, offset: 0, key: Buffer.from('c1'), value: Buffer.from('{"amount":500}'), timestamp: 1000 },
 * ]);
 * for (const o of result.outputs) console.log(o.topic, o.key?.toString(), o.value?.toString(), o.timestamp);
 */
export function runModel(
  built: BuiltTopology,
  input: readonly ModelInput[],
  options: ModelOptions = {},
): ModelResult {
  const partitions = checkInput(input);
  for (const [topic, n] of Object.entries(options.partitions ?? {})) {
    if (!Number.isSafeInteger(n) || n < 1)
      throw new RedfenceError('RF_INVALID_ARGUMENT', `runModel: partitions.${topic} must be an integer >= 1`);
    partitions.set(topic, Math.max(n, partitions.get(topic) ?? 0));
  }
  const counted = new Set(Object.keys(options.partitions ?? {}));
  // a record whose walk or aggregation throws is run again from the start without it, until none throws
  // (all or nothing: what it did before the throw, in another branch too, is not kept); an update whose
  // walk on threw downstream, without that walk (its state kept)
  const book = new Failures();
  for (;;) {
    const run = new Run(built, new Map(partitions), book, counted);
    try {
      for (const r of input) run.input(r);
      const { outputs, deadLetters, dropped, failed, misplaced } = run;
      return { outputs, deadLetters, dropped, failed, misplaced };
    } catch (error) {
      if (error instanceof RunFails) throw error.error;
      if (!(error instanceof WalkThrow || error instanceof StepThrew) || !book.learn(error)) throw error;
    }
  }
}
