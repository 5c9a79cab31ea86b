/**
 * The wall-clock close of idle partitions (`idleCloseMs`; docs/streams.md, "Closing the windows of an
 * idle partition"). Stream time moves only with records, so the last windows of a partition that stops
 * receiving records would never close. The owner of an input partition of a windowed sub-topology (an
 * input topic or a repartition topic) produces a tick into that partition itself (src/topology/tick.ts:
 * null key, empty value, header `redfence-tick`, the wall clock as its timestamp) when
 *
 * - the partition is owned, active (not fenced, not sought back) and Redis is not in an outage;
 * - it has had no batch for `idleCloseMs` (counted from the end of its last batch, or from the tick
 *   produced last, or from its assignment);
 * - no tick of this instance is outstanding there: one produced and not yet read back (so ticks never
 *   pile up while the consumer is behind, and one is read before the next is made). The consumed
 *   position is not compared with the high watermark: under read_committed, transaction markers and
 *   aborted records sit between them, so an exactly-once partition never reads as caught up;
 * - a tick at the wall clock would do something: some windowed aggregation of the partition holds a
 *   window its stream time has not closed yet (from the clocks the executor keeps), and the wall clock
 *   is past that stream time. Once every window it wrote is closed, an idle partition gets no more ticks.
 *
 * The tick is then consumed like any record: its offset orders it, its effects (the final results of
 * what it closes) are fenced and pending under it in Redis, a replay re-emits them. Why it is produced
 * in a Kafka step of its own (the commit pipeline's `alone`): a tick belongs to no batch and commits no
 * offset, so its outcome must not be tied to a batch's (an aborted batch step seeks its partitions back;
 * a failed tick has nothing to seek back, it is simply made again after the next idle spell), and the
 * pipeline runs one step at a time, so exactly-once keeps one open transaction on its one producer and
 * the tick's transaction never interleaves with a batch's. Ordering needs nothing more: the tick is
 * appended after whatever the partition holds, and read after it.
 */
import { RedfenceError } from '../../errors/index.js';
import type { KafkaPort, OutRecord } from '../../kafka/types.js';
import type { Logger } from '../../runtime/logger.js';
import type { RunPlan } from '../../topology/run/plan.js';
import type { StreamTimes } from '../../topology/run/types.js';
import { TICK_HEADER } from '../../topology/tick.js';
import type { WindowSpec } from '../../topology/windows.js';
import type { OwnedPartition } from '../partition-table.js';

export interface TickContext {
  readonly idleMs: number;
  readonly instanceId: string;
  readonly log: Logger;
  /** The executor's plan (made at start for a topology reading a pattern). */
  plan(): RunPlan;
  /** The partition's stream time now (the executor's clocks, batches not yet committed included). */
  streamTime(topic: string, partition: number): StreamTimes;
  /** Owned partitions, not fenced. */
  active(): readonly OwnedPartition[];
  /** False while not running or in a Redis outage (the owned partitions are paused). */
  ticking(): boolean;
  /** Produces the ticks in a Kafka step of their own (CommitPipeline.alone). */
  produce(records: readonly OutRecord[]): Promise<void>;
  /** Counts the ticks produced (metrics). */
  produced(n: number): void;
  /** The wall clock (ms). Default Date.now. */
  now?(): number;
}

interface PartitionIdle {
  /** When the partition last had a batch end, a tick produced, or was first seen owned. */
  since: number;
  /** A tick of this instance was produced and not yet read back. */
  outstanding: boolean;
  /** A batch of it is in the executor now. */
  busy: boolean;
}

export class IdleTicks {
  readonly #ctx: TickContext;
  readonly #now: () => number;
  readonly #idle = new Map<string, PartitionIdle>();
  #timer: NodeJS.Timeout | undefined;
  #checking = false;

  constructor(ctx: TickContext) {
    this.#ctx = ctx;
    this.#now = ctx.now ?? Date.now;
  }

  start(): void {
    const every = Math.max(50, Math.min(1000, Math.floor(this.#ctx.idleMs / 4)));
    this.#timer = setInterval(() => void this.check(), every);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** A batch of the partition starts (`ticks`: how many of its records are ticks). */
  batchStarted(topic: string, partition: number, ticks: number): void {
    const p = this.#of(topic, partition);
    p.busy = true;
    if (ticks > 0) p.outstanding = false;
  }

  /** A batch of the partition ended (done or failed): the idle time counts from now. */
  batchEnded(topic: string, partition: number): void {
    const p = this.#of(topic, partition);
    p.busy = false;
    p.since = this.#now();
  }

  /** The partition was revoked or lost: what was known of it goes (a new assignment starts afresh). */
  forget(topic: string, partition: number): void {
    this.#idle.delete(`${topic}/${partition}`);
  }

  /** One look at the owned partitions: ticks for those that are due, in one step. Returns how many. */
  async check(): Promise<number> {
    if (this.#checking || !this.#ctx.ticking()) return 0;
    this.#checking = true;
    try {
      const due = this.#due();
      if (due.length === 0) return 0;
      const at = this.#now();
      const records: OutRecord[] = due.map((e) => ({
        topic: e.topic,
        partition: e.partition,
        key: null,
        value: Buffer.alloc(0),
        headers: { [TICK_HEADER]: this.#ctx.instanceId },
        timestamp: String(at),
      }));
      try {
        await this.#ctx.produce(records);
      } catch (err) {
        // made again after the next idle spell (a fatal Kafka error closes the processor anyway)
        for (const e of due) this.#of(e.topic, e.partition).since = this.#now();
        this.#ctx.log.warn({ partitions: due.length, err: (err as Error).message }, 'ticks not produced');
        return 0;
      }
      for (const e of due) {
        const p = this.#of(e.topic, e.partition);
        p.outstanding = true;
        p.since = this.#now();
      }
      this.#ctx.produced(records.length);
      this.#ctx.log.debug(
        { partitions: due.map((e) => `${e.topic}/${e.partition}`), timestamp: at },
        'ticks produced into idle partitions',
      );
      return records.length;
    } finally {
      this.#checking = false;
    }
  }

  #due(): OwnedPartition[] {
    const plan = this.#ctx.plan();
    const now = this.#now();
    const due: OwnedPartition[] = [];
    for (const e of this.#ctx.active()) {
      if (e.rewound !== undefined || !ticksInto(plan, e.topic)) continue;
      const p = this.#of(e.topic, e.partition);
      if (p.busy || p.outstanding || now - p.since < this.#ctx.idleMs) continue;
      if (tickCloses(plan, e.topic, this.#ctx.streamTime(e.topic, e.partition), now)) due.push(e);
    }
    return due;
  }

  #of(topic: string, partition: number): PartitionIdle {
    const key = `${topic}/${partition}`;
    let p = this.#idle.get(key);
    if (p === undefined) {
      p = { since: this.#now(), outstanding: false, busy: false };
      this.#idle.set(key, p);
    }
    return p;
  }
}

/**
 * At start, before any partition is taken: ticks are written into the input topics of windowed
 * sub-topologies, so the principal needs Kafka `Write` on them. In exactly-once mode a tick refused by
 * the authorizer leaves the transactional producer unusable (the broker refuses the abort of a
 * transaction it never opened, and the processor closes), in at-least-once mode every tick is refused
 * with a warning and no window of an idle partition closes: either way a missing ACL is refused here
 * (RF_KAFKA_AUTH naming the topics), where the brokers tell (KafkaPort.unwritableTopics).
 */
export async function checkTickWrite(
  port: Pick<KafkaPort, 'unwritableTopics'>,
  plan: RunPlan,
): Promise<void> {
  if (typeof port.unwritableTopics !== 'function') return;
  const topics = [
    ...new Set([...plan.aggregates.values()].filter((a) => a.node.window !== null).map((a) => a.topic)),
  ];
  const refused = await port.unwritableTopics(topics);
  if (refused.length > 0)
    throw new RedfenceError(
      'RF_KAFKA_AUTH',
      `idleCloseMs writes ticks into the input partitions of windowed sub-topologies, and this principal may not write ${refused.join(', ')}: ` +
        'grant it Write (and Describe) on them, or run without idleCloseMs (docs/streams.md, "Closing the windows of an idle partition")',
      { details: { topics: refused } },
    );
}

/** Whether a windowed aggregation reads `topic` (its sub-topology's partitions get ticks). */
function ticksInto(plan: RunPlan, topic: string): boolean {
  for (const a of plan.aggregates.values()) if (a.topic === topic && a.node.window !== null) return true;
  return false;
}

/**
 * Whether a tick at `now` would move some windowed aggregation of `topic` that holds a window its
 * stream time has not closed: its clock has written a window (`store`: the newest window start, for
 * sessions the newest session end), its stream time is below the time that closes that window, and
 * `now` is past its stream time.
 */
export function tickCloses(plan: RunPlan, topic: string, times: StreamTimes, now: number): boolean {
  for (const a of plan.aggregates.values()) {
    const w = a.node.window;
    if (w === null || a.topic !== topic) continue;
    const c = times[a.node.name];
    if (c === undefined || c.store < 0 || now <= c.stream) continue;
    if (c.stream < closedAt(w, c.store)) return true;
  }
  return false;
}

/** The stream time at which the window starting (sessions: ending) at `store` is closed. */
function closedAt(w: WindowSpec, store: number): number {
  switch (w.kind) {
    case 'tumbling':
    case 'hopping':
      // [start, start + size) closes when end <= stream - grace
      return store + w.sizeMs + w.graceMs;
    case 'session':
      // a session ending at `end` closes when end < stream - grace - gap
      return store + w.inactivityGapMs + w.graceMs + 1;
    case 'sliding':
      // [start, start + d] (both ends inclusive) closes when start + d < stream - grace
      return store + w.timeDifferenceMs + w.graceMs + 1;
  }
}
