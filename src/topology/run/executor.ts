/**
 * The topology runtime's batch executor: one partition batch of a built topology's sub-topology (the one
 * reading the batch's topic: the input, or a repartition topic) run against Redis through the store
 * interface's key call, with the reference model's results (docs/streams.md, "Running on Redis").
 * Records a sub-topology sends to a repartition topic are outputs of the batch like any other: the caller
 * produces them with the rest (placed by their key's murmur2), and the sub-topology reading that topic
 * gets them as its own batches.
 *
 * A batch goes through these steps, in order:
 *  1. per record, the stateless nodes (filters, maps, splits, sinks) as the model walks them; a record
 *     reaching an aggregation is decided as the model decides it (drops, stream time, late windows,
 *     session bounds, the windows that close) and becomes effects on its fence key (the grouped key's
 *     bytes) (steps.ts, arrive.ts);
 *  2. emit-final only: the partition's index of windows by close time gets the batch's new windows and
 *     gives the closing ones (final.ts; session windows: the keys are read and folded first, and the
 *     index gets the sessions they write, final-session.ts); every effect is placed in its key's key
 *     record, one per input offset and key, a closing window's `final` effects in the record that
 *     closed it;
 *  3. one key call per fence key (KeyStore.callMany): each record decided once against the key's fence;
 *     a key with a reduce or aggregate is read first, folded in JS and written with `expect` (fold.ts);
 *  4. per record again, in order, the results (APPLY, REBASE, REEMIT) are forwarded down the graph
 *     (toStream, filters, maps, sinks): updates, a session's tombstones, or final results once: the
 *     outputs come in the model's order (forward.ts). SKIP gives nothing, REJECT a dead letter, FENCE
 *     stops the batch (RF_TOPOLOGY_FENCED) with nothing forwarded. A node that throws downstream makes
 *     its record a dead letter marked `stateApplied`, without that update's outputs (forward.ts).
 *
 * A replay of a batch (the same records before their commit, the stream time of the commit) re-emits the
 * same outputs from the pending results and changes no state.
 */
import { RedfenceError } from '../../errors/index.js';
import { misplacedKey } from '../../partitioner/index.js';
import {
  CloseIndex,
  type CloseIndexRedis,
  type IndexedWindow,
  isCloseIndexRedis,
  type KeyRecordResult,
  KeyStore,
} from '../../store/index.js';
import type { ModelInput, ModelMisplaced } from '../model.js';
import type { BuiltTopology } from '../types.js';
import { checkBatch, options, type TopologyExecutorOptions } from './check.js';
import { closing, type IndexWork, settledUpTo, syncIndexes, type WindowClock } from './final.js';
import { sessionEntry, sessionOfEntry, sessionsSettledUpTo } from './final-session.js';
import { slidingSettledUpTo } from './final-sliding.js';
import { FlowTally } from './flows.js';
import { callGroups, FoldThrew } from './fold.js';
import { type FoldedAhead, foldAhead } from './fold-ahead.js';
import { type ForwardContext, forwardSteps } from './forward.js';
import { OwnerCache } from './owner-cache.js';
import { planTopology, type RunPlan } from './plan.js';
import { placeSteps, slidingBounded, type WalkStep, walkBatch } from './steps.js';
import type { StreamTimes, TopologyBatch, TopologyBatchResult } from './types.js';

export type { TopologyExecutorOptions } from './check.js';

/**
 * Runs partition batches of a built topology on Redis.
 *
 * @example
 * const exec = new TopologyExecutor(built, { redis });
 * const { outputs, deadLetters, streamTime } = await exec.runBatch({
 *   topic: 'orders', partition: 0, epoch: 1, committedOffset: 0,
 *   records: [{ topic: 'orders', partition: 0, offset: 0, key: Buffer.from('c1'),
 *     value: Buffer.from('{"amount":500}'), timestamp: Date.now() }],
 * });
 */
export class TopologyExecutor {
  readonly plan: RunPlan;
  /** The key calls in the application's own fence space (the first stateful sub-topology's, and the layout marker). */
  readonly store: KeyStore;
  /** Each later stateful sub-topology's key calls, by the topic it reads (its fence space: plan.ts). */
  readonly #spaces = new Map<string, KeyStore>();
  /** By topic-partition (tpKey). */
  readonly #times = new Map<string, StreamTimes>();
  readonly #running = new Set<string>();
  /** Per topic-partition, the stream time after each batch not yet passed by a commit: [next offset, times]. */
  readonly #history = new Map<string, [number, StreamTimes][]>();
  readonly #retention: number;
  readonly #now: () => number;
  readonly #index: CloseIndex | null;
  /** Some aggregation is session- or sliding-windowed with emit('final') (final-session.ts, final-sliding.ts). */
  readonly #finalSessions: boolean;
  /** Some aggregation is sliding-windowed with emit('final'): a key record's final parts come last (steps.ts). */
  readonly #finalSliding: boolean;
  /** Owner-local state (owner-cache.ts), when the ownerCache option is set. */
  readonly ownerCache: OwnerCache | null;

  constructor(built: BuiltTopology, opts: TopologyExecutorOptions) {
    const { retention, now, ownerBytes } = options(opts);
    this.ownerCache = ownerBytes > 0 ? new OwnerCache(ownerBytes) : null;
    this.plan = planTopology(built);
    const { redis, tenant, keyEncoding } = opts;
    const storeOf = (space: string | null) =>
      new KeyStore({
        redis,
        app: built.applicationId,
        ...(tenant === undefined ? {} : { tenant }),
        ...(keyEncoding === undefined ? {} : { keyEncoding }),
        ...(space === null ? {} : { space }),
      });
    this.store = storeOf(null);
    for (const sub of this.plan.subs.values())
      if (sub.space !== null) this.#spaces.set(sub.topic, storeOf(sub.space));
    const final = [...this.plan.aggregates.values()].some(
      (a) => a.node.emit === 'final' && a.node.window !== null,
    );
    if (final && !isCloseIndexRedis(redis))
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        "TopologyExecutor: emit('final') needs a redis with zadd, zrangebyscore and zremrangebyscore",
      );
    this.#index = final
      ? new CloseIndex({
          redis: redis as unknown as CloseIndexRedis, // checked above
          app: built.applicationId,
          ...(tenant === undefined ? {} : { tenant }),
          ...(keyEncoding === undefined ? {} : { keyEncoding }),
        })
      : null;
    const finalOf = (kind: string) =>
      [...this.plan.aggregates.values()].some((a) => a.node.emit === 'final' && a.node.window?.kind === kind);
    this.#finalSliding = finalOf('sliding');
    this.#finalSessions = finalOf('session') || this.#finalSliding;
    this.#retention = retention;
    this.#now = now;
  }

  /** The key calls of the sub-topology reading `topic`: its fence space's (plan.ts). */
  storeFor(topic: string): KeyStore {
    return this.#spaces.get(topic) ?? this.store;
  }

  /**
   * The partition's stream time (the seam to the offset commit's metadata): per windowed aggregation, its
   * clock. `topic`: one the topology reads (default its input).
   */
  streamTime(partition: number, topic = this.plan.topic): StreamTimes {
    return this.#times.get(tpKey(topic, partition)) ?? {};
  }

  /** Sets the partition's stream time: on assignment, from the committed offset's metadata (before a replay). */
  setStreamTime(partition: number, times: StreamTimes, topic = this.plan.topic): void {
    const ok = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= -1;
    for (const [node, c] of Object.entries(times))
      if (!this.plan.aggregates.has(node) || !ok(c?.stream) || !ok(c?.emitted) || !ok(c?.store))
        throw new RedfenceError(
          'RF_INVALID_ARGUMENT',
          `setStreamTime: ${JSON.stringify(node)} is not an aggregation with a clock of integers >= -1`,
        );
    this.#times.set(tpKey(topic, partition), freeze(new Map(Object.entries(times))));
    this.ownerCache?.dropPartition(tpKey(topic, partition));
  }

  /** Forgets a partition's stream time (revoked). */
  forget(partition: number, topic = this.plan.topic): void {
    this.#times.delete(tpKey(topic, partition));
    this.#history.delete(tpKey(topic, partition));
    this.ownerCache?.dropPartition(tpKey(topic, partition));
  }

  /**
   * After the partition's commit reached `committedOffset` (the next offset to consume): drops the
   * emit-final index entries no replay from there can need (windows final or lost before it). Returns
   * how many were dropped.
   */
  async committed(topic: string, partition: number, committedOffset: number): Promise<number> {
    const history = this.#history.get(tpKey(topic, partition)) ?? [];
    let at: StreamTimes | undefined;
    while (history.length > 0 && (history[0]?.[0] ?? Number.POSITIVE_INFINITY) <= committedOffset)
      at = history.shift()?.[1];
    if (at === undefined || this.#index === null) return 0;
    let dropped = 0;
    for (const a of this.plan.aggregates.values()) {
      const w = a.node.window;
      if (a.node.emit !== 'final' || w === null) continue;
      const clock = at[a.node.name];
      const upTo =
        w.kind === 'session'
          ? sessionsSettledUpTo(clock)
          : w.kind === 'sliding'
            ? slidingSettledUpTo(w, clock)
            : settledUpTo(w.sizeMs, clock);
      if (upTo < 0) continue;
      dropped += await this.#index.remove(topic, partition, a.valueStore, upTo);
    }
    return dropped;
  }

  /**
   * Runs one partition batch: its outputs, dead letters, drops and the partition's new stream time.
   * Batches of one partition run one after another (RF_INVALID_STATE otherwise); partitions in parallel.
   */
  async runBatch(batch: TopologyBatch): Promise<TopologyBatchResult> {
    checkBatch(this.plan, batch);
    // A batch starts from the stream time its predecessor left: one batch per partition at a time.
    const tp = tpKey(batch.topic, batch.partition);
    if (this.#running.has(tp))
      throw new RedfenceError(
        'RF_INVALID_STATE',
        `topology batch: partition ${tp} already has a batch running (they run one after another)`,
      );
    this.#running.add(tp);
    try {
      return await this.#run(batch, tp);
    } catch (error) {
      // an unknown outcome (some calls may have applied): what this owner knows of the keys is gone
      this.ownerCache?.dropPartition(tp);
      throw error;
    } finally {
      this.#running.delete(tp);
    }
  }

  /**
   * Runs the batch from its starting clocks until no aggregation's own code throws before the calls
   * (fold.ts' FoldThrew): each time with the record that threw first a dead letter, walked no more (all
   * or nothing, as the model's runs: docs/streams.md, "A record that cannot be walked"). The emit-final
   * index entries a failed try added stay: a window no record writes finalizes to nothing.
   */
  async #run(batch: TopologyBatch, tp: string): Promise<TopologyBatchResult> {
    const failed = new Map<number, { node: string; error: unknown }>();
    for (;;) {
      try {
        return await this.#attempt(batch, tp, failed);
      } catch (error) {
        if (!(error instanceof FoldThrew)) throw error;
        if (failed.has(error.offset))
          throw new RedfenceError(
            'RF_INVALID_STATE',
            `topology batch ${tp}: offset ${error.offset} threw in its fold after it was made a dead letter`,
          );
        failed.set(error.offset, { node: error.node, error: error.error });
      }
    }
  }

  async #attempt(
    batch: TopologyBatch,
    tp: string,
    failed: ReadonlyMap<number, { node: string; error: unknown }>,
  ): Promise<TopologyBatchResult> {
    const before = this.streamTime(batch.partition, batch.topic);
    const clocks = new Map(Object.entries(before).map(([n, c]) => [n, { ...c }]));
    const expireAt = (end: number, grace: number) => Math.max(end + grace, this.#now()) + this.#retention;
    const sources = this.plan.subs.get(batch.topic)?.sources ?? [];
    const store = this.storeFor(batch.topic);
    const tally = new FlowTally();
    const walked = walkBatch(
      this.plan,
      sources,
      batch.records,
      clocks,
      expireAt,
      tally,
      failed,
      misplacedIn(this.plan, batch),
    );
    // emit-final sessions and sliding windows: their bounds follow from the keys' reads, folded before
    // any index or call
    let ahead: FoldedAhead | undefined;
    let steps = walked.steps;
    if (this.#finalSessions) {
      const pre = placeSteps(walked.steps, () => [], this.#finalSliding);
      ahead = await foldAhead(store, batch, pre.groups, pre.steps, { clocks, expireAt });
      if (ahead.threw !== undefined) {
        // the earliest record that throws may be one folded later: every fold of the batch, in order
        await callGroups(store, batch, pre.groups, pre.steps, { clocks, expireAt }, true);
        throw ahead.threw;
      }
      steps = slidingBounded(steps, ahead.storeAfter);
    }
    const indexed = await this.#syncIndexes(batch, steps, ahead);
    const placed = placeSteps(
      steps,
      (agg, range) => {
        const due = closing(indexed.get(agg.valueStore) ?? [], range);
        return agg.node.window?.kind === 'session' ? due.map(sessionOfEntry) : due;
      },
      this.#finalSliding,
    );
    const { replies, conflicts, cache } = await callGroups(store, batch, placed.groups, placed.steps, {
      clocks,
      expireAt,
      ...(ahead === undefined ? {} : { ahead: ahead.ahead }),
      ...(this.ownerCache === null ? {} : { owner: this.ownerCache }),
    });
    this.#checkFence(batch, replies);
    const ctx: ForwardContext = {
      plan: this.plan,
      replies,
      outputs: [],
      deadLetters: [],
      dropped: [],
      verdicts: { APPLY: 0, REBASE: 0, SKIP: 0, REEMIT: 0, REJECT: 0, CONFLICT: conflicts },
      tally,
    };
    forwardSteps(placed.steps, ctx, batch.topic);
    const streamTime = freeze(clocks);
    this.#times.set(tp, streamTime);
    const last = batch.records[batch.records.length - 1];
    if (last !== undefined) {
      const history = (this.#history.get(tp) ?? []).filter(([next]) => next <= last.offset);
      history.push([last.offset + 1, streamTime]);
      this.#history.set(tp, history);
    }
    const { outputs, deadLetters, dropped, verdicts } = ctx;
    return { outputs, deadLetters, dropped, streamTime, verdicts, nodes: tally.flows(), ownerCache: cache };
  }

  /**
   * Step 2's Redis part: the emit-final indexes get the batch's windows (and the sessions and sliding
   * windows its folds write, by value store) and give the closing ones.
   */
  async #syncIndexes(batch: TopologyBatch, steps: readonly WalkStep[], ahead?: FoldedAhead) {
    if (this.#index === null) return new Map<number, IndexedWindow[]>();
    const work = new Map<number, IndexWork>();
    const of = (store: number) => {
      let w = work.get(store);
      if (w === undefined) {
        w = { store, add: [], ranges: [] };
        work.set(store, w);
      }
      return w;
    };
    for (const s of steps) {
      if ('arrival' in s && s.arrival.agg.node.emit === 'final' && s.arrival.starts !== null)
        for (const start of s.arrival.starts)
          of(s.arrival.agg.valueStore).add.push({ key: s.arrival.fenceKey, start });
      else if ('closes' in s) of(s.closes.valueStore).ranges.push(s.range);
    }
    for (const [store, list] of ahead?.written ?? []) of(store).add.push(...list.map(sessionEntry));
    for (const [store, list] of ahead?.windows ?? []) of(store).add.push(...list);
    return syncIndexes(this.#index, batch.topic, batch.partition, [...work.values()]);
  }

  #checkFence(batch: TopologyBatch, replies: readonly KeyRecordResult[][]): void {
    for (const rs of replies) {
      const f = rs.find((r) => r.verdict === 'FENCE');
      if (f !== undefined && f.verdict === 'FENCE')
        throw new RedfenceError(
          'RF_TOPOLOGY_FENCED',
          `topology ${this.plan.built.applicationId}: partition ${batch.partition} of ${batch.topic} has a newer owner (epoch ${f.epoch} > ${batch.epoch}); the batch must not be committed`,
          {
            details: {
              topic: batch.topic,
              partition: batch.partition,
              epoch: batch.epoch,
              newerEpoch: f.epoch,
            },
          },
        );
    }
  }
}

/**
 * The batch's partition check (docs/streams.md, "The partition check"), when its count is given: a keyed
 * record of a sub-topology keeping state per key, or of a repartition topic, whose key murmur2 places on
 * another partition.
 */
function misplacedIn(plan: RunPlan, batch: TopologyBatch): (rec: ModelInput) => ModelMisplaced | null {
  const sub = plan.subs.get(batch.topic);
  const count = batch.partitionCount;
  const node = sub?.sources[0]?.name;
  if (count === undefined || node === undefined || !(sub?.stateful === true || sub?.internal === true))
    return () => null;
  const earlier = batch.partitionCounts ?? [];
  return (rec) => {
    if (rec.key === null) return null;
    const expected = misplacedKey(rec.key, rec.partition, count, earlier);
    if (expected === null) return null;
    return { reason: 'wrong-partition', node, expected, partitions: count, source: rec };
  };
}

/** A topic-partition's key in the executor's maps. */
function tpKey(topic: string, partition: number): string {
  return `${topic}/${partition}`;
}

function freeze(clocks: Map<string, WindowClock>): StreamTimes {
  return Object.freeze(Object.fromEntries([...clocks].map(([n, c]) => [n, Object.freeze({ ...c })])));
}
