/**
 * The handler's scheduler: records of each owned partition go into lanes, one per Kafka key; a lane
 * runs one record at a time (order within a key), lanes run concurrently up to `concurrency` calls
 * (in turn: a lane goes to the back of the ready queue after each record). Nothing here blocks the
 * poll loop: `accept` queues and returns.
 *
 * Bounds, enforced by pausing the partition rather than buffering without limit (a pause loses
 * nothing: the port fetches the partition again from the first record not handed over):
 *   - accepted, unfinished records of one partition  >= maxInFlightPerPartition -> pause it
 *   - records waiting in one key's lane              >= maxPerKey               -> pause its partition
 *   - accepted, unfinished records of the instance   >= maxInFlight             -> pause every partition
 * and resumed once all three are at or below half their bound. A delivered batch is accepted whole,
 * so a bound can be passed by up to one batch (`kafka.maxBatchSize`). Records without a key have no
 * order to keep: each gets a lane of its own.
 */
import { setMaxListeners } from 'node:events';
import type { InRecord, KafkaPort, TopicPartition } from '../kafka/types.js';
import { OffsetTracker } from './tracker.js';

/** `forwarded`: produced to a retry topic; `dropped`: given up without a dead letter (retry.topics.dlt). */
export type Outcome = 'done' | 'dead-lettered' | 'forwarded' | 'dropped' | 'abandoned';

interface Lane {
  readonly part: PartitionWork;
  readonly key: string;
  readonly records: InRecord[];
}

/** One owned partition's work. */
export class PartitionWork {
  readonly tp: TopicPartition;
  readonly epoch: number;
  readonly tracker = new OffsetTracker();
  readonly lanes = new Map<string, Lane>();
  /** Aborted when the partition stops (revocation, close, fence): no new starts, no more retries. */
  readonly stop = new AbortController();
  /** Aborted when its unfinished work is abandoned: ctx.signal. */
  readonly abandon = new AbortController();
  /** The last committed offset (the next to consume), -1 before any commit. */
  committed = -1;
  fenced = false;
  paused = false;
  /** A rate-limited record holds the partition paused until then (ms since the epoch; src/handler/hold.ts). */
  heldUntil = 0;
  /** A retry-topic partition's epoch for the retry chain's key order (src/handler/key-order.ts), 0 when unused. */
  orderEpoch = 0;
  /** Paused by its retry gate (records held until due): a bound's resume leaves it paused. */
  held = false;
  /** Its unfinished records no longer count in the instance's in-flight total. */
  dropped = false;
  /** handle() calls of this partition still running (an abandoned one until it settles). */
  running = 0;
  keysFull = 0;
  keysHigh = 0;
  #idle: Array<() => void> = [];

  constructor(tp: TopicPartition, epoch: number) {
    this.tp = tp;
    this.epoch = epoch;
    // every running call may listen on ctx.signal (fetch, http.request): no max-listeners warning
    setMaxListeners(0, this.stop.signal, this.abandon.signal);
  }

  get stopped(): boolean {
    return this.stop.signal.aborted;
  }

  /** Resolves when no call of this partition runs. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** @internal */
  settled(): void {
    this.running--;
    if (this.running === 0) for (const wake of this.#idle.splice(0)) wake();
  }
}

export interface SchedulerContext {
  readonly concurrency: number;
  readonly maxInFlight: number;
  readonly maxInFlightPerPartition: number;
  readonly maxPerKey: number;
  readonly kafka: Pick<KafkaPort, 'pause' | 'resume'>;
  /** Runs one record to its outcome; never rejects. */
  run(part: PartitionWork, record: InRecord): Promise<Outcome>;
  /** After a record's outcome, with the partition's in-flight count. */
  finished(part: PartitionWork, outcome: Outcome): void;
}

export class Scheduler {
  readonly #ctx: SchedulerContext;
  readonly #parts = new Map<string, PartitionWork>();
  #ready: Lane[] = [];
  #readyHead = 0;
  #running = 0;
  #total = 0;

  constructor(ctx: SchedulerContext) {
    this.#ctx = ctx;
  }

  /** handle() calls running now in this instance. */
  get running(): number {
    return this.#running;
  }

  /** Accepted, unfinished records of the live partitions. */
  get inFlight(): number {
    return this.#total;
  }

  add(tp: TopicPartition, epoch: number): PartitionWork {
    const part = new PartitionWork(tp, epoch);
    this.#parts.set(`${tp.topic}/${tp.partition}`, part);
    return part;
  }

  get(topic: string, partition: number): PartitionWork | undefined {
    return this.#parts.get(`${topic}/${partition}`);
  }

  all(): PartitionWork[] {
    return [...this.#parts.values()];
  }

  /** Queues a delivered batch (offset order) and starts what the concurrency allows. */
  accept(part: PartitionWork, records: readonly InRecord[]): void {
    if (part.stopped) return;
    const { maxPerKey } = this.#ctx;
    const high = Math.floor(maxPerKey / 2);
    for (const r of records) {
      const offset = Number(r.offset);
      if (offset <= part.tracker.last) continue; // delivered again after a seek: tracked already
      part.tracker.accept(offset);
      this.#total++;
      const key = r.key === null ? `\u0000${offset}` : r.key.toString('latin1');
      let lane = part.lanes.get(key);
      if (lane === undefined) {
        lane = { part, key, records: [] };
        part.lanes.set(key, lane);
        this.#pushReady(lane);
      }
      lane.records.push(r);
      const n = lane.records.length;
      if (n === maxPerKey) part.keysFull++;
      if (n === high + 1) part.keysHigh++;
    }
    this.#pump();
    if (!part.paused && this.#full(part)) this.#pause(part);
    if (this.#total >= this.#ctx.maxInFlight)
      for (const p of this.#parts.values()) if (!p.paused) this.#pause(p);
  }

  /**
   * Stops a partition's scheduling: nothing more of it starts, its queued records are dropped (they
   * were never finished, so never committed). Running calls go on; `part.idle()` waits for them.
   */
  stop(part: PartitionWork, reason?: unknown): void {
    if (!part.stopped) part.stop.abort(reason);
    if (part.dropped) return;
    part.dropped = true;
    this.#total -= part.tracker.inFlight;
    part.lanes.clear();
    for (const p of this.#parts.values()) if (p.paused && this.#low(p)) this.#resume(p);
  }

  /** Forgets a stopped partition. */
  remove(part: PartitionWork): void {
    if (!part.stopped) this.stop(part);
    const k = `${part.tp.topic}/${part.tp.partition}`;
    if (this.#parts.get(k) === part) this.#parts.delete(k);
  }

  /** A hold (src/handler/hold.ts) pauses the partition; `#low` keeps it paused while held. */
  pauseHeld(part: PartitionWork): void {
    if (!part.paused) this.#pause(part);
  }

  /** After a hold: resumes the partition when nothing holds it and its bounds allow. */
  wake(part: PartitionWork): void {
    if (part.paused && this.#low(part)) this.#resume(part);
  }

  #pushReady(lane: Lane): void {
    this.#ready.push(lane);
  }

  #pump(): void {
    while (this.#running < this.#ctx.concurrency && this.#readyHead < this.#ready.length) {
      const lane = this.#ready[this.#readyHead] as Lane;
      this.#ready[this.#readyHead++] = undefined as unknown as Lane;
      if (this.#readyHead > 1024 && this.#readyHead * 2 > this.#ready.length) {
        this.#ready = this.#ready.slice(this.#readyHead);
        this.#readyHead = 0;
      }
      if (lane.part.stopped || lane.records.length === 0) continue;
      void this.#runLane(lane);
    }
  }

  async #runLane(lane: Lane): Promise<void> {
    const { part } = lane;
    const record = lane.records[0] as InRecord;
    this.#running++;
    part.running++;
    let outcome: Outcome;
    try {
      outcome = await this.#ctx.run(part, record);
    } catch {
      outcome = 'abandoned';
    }
    this.#running--;
    // A call that ends while its partition drains (stopped, not abandoned) still counts: the drain
    // waits for it so that its record is committed.
    if (!part.abandon.signal.aborted && outcome !== 'abandoned') {
      part.tracker.finish(Number(record.offset));
      if (!part.dropped) this.#total--;
      const { maxPerKey } = this.#ctx;
      const n = lane.records.length;
      lane.records.shift();
      if (n === maxPerKey) part.keysFull--;
      if (n === Math.floor(maxPerKey / 2) + 1) part.keysHigh--;
      if (lane.records.length > 0 && !part.stopped) this.#pushReady(lane);
      else part.lanes.delete(lane.key);
      this.#ctx.finished(part, outcome);
      if (part.paused && this.#low(part)) this.#resume(part);
      if (this.#total === Math.floor(this.#ctx.maxInFlight / 2))
        for (const p of this.#parts.values()) if (p.paused && this.#low(p)) this.#resume(p);
    }
    part.settled();
    this.#pump();
  }

  #full(part: PartitionWork): boolean {
    return (
      part.tracker.inFlight >= this.#ctx.maxInFlightPerPartition ||
      part.keysFull > 0 ||
      this.#total >= this.#ctx.maxInFlight
    );
  }

  #low(part: PartitionWork): boolean {
    return (
      !part.stopped &&
      part.heldUntil <= Date.now() &&
      part.tracker.inFlight <= Math.floor(this.#ctx.maxInFlightPerPartition / 2) &&
      part.keysHigh === 0 &&
      this.#total <= Math.floor(this.#ctx.maxInFlight / 2)
    );
  }

  #pause(part: PartitionWork): void {
    if (part.stopped) return;
    part.paused = true;
    this.#ctx.kafka.pause([part.tp]);
  }

  #resume(part: PartitionWork): void {
    part.paused = false;
    if (!part.held) this.#ctx.kafka.resume([part.tp]);
  }
}
