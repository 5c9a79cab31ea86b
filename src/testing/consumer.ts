/**
 * A memory port's consumer side: its membership in the group (the Member the group rebalances) and
 * the delivery loop. Rebalance callbacks and batches take turns, so a revocation never races a batch
 * of the same consumer (the real client delivers one batch at a time and runs rebalance callbacks
 * between them); a batch holds records of one partition, read_committed, at most maxBatchSize.
 */
import { type ConsumerHandlers, type TopicPartition, tpKey } from '../kafka/types.js';
import type { Cluster } from './cluster.js';
import type { Group, Member } from './group.js';
import { toInRecord } from './log.js';

/** After a batch handler throws, its partition is delivered again after this pause. */
const REDELIVERY_BACKOFF_MS = 5;

export class GroupConsumer implements Member {
  readonly owned = new Map<string, TopicPartition>();
  topics: readonly string[] = [];
  readonly #cluster: Cluster;
  readonly #group: Group;
  readonly #maxBatchSize: number;
  /** Errors thrown by the handlers, for the test to look at. */
  readonly #errors: unknown[];
  #handlers: ConsumerHandlers | undefined;
  #active = false;
  readonly #position = new Map<string, number>();
  readonly #seeks = new Map<string, number>();
  readonly #paused = new Set<string>();
  #turn: Promise<void> = Promise.resolve();
  #loop: Promise<void> | undefined;
  #cursor = 0;
  #delivered = 0;
  #idle = false;
  #idleWaiters: (() => void)[] = [];

  constructor(cluster: Cluster, group: Group, maxBatchSize: number, errors: unknown[]) {
    this.#cluster = cluster;
    this.#group = group;
    this.#maxBatchSize = maxBatchSize;
    this.#errors = errors;
  }

  get active(): boolean {
    return this.#active;
  }

  get delivered(): number {
    return this.#delivered;
  }

  get assignment(): TopicPartition[] {
    return [...this.owned.values()].sort((a, b) =>
      a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1,
    );
  }

  /** Joins the group (the assignment follows in a later turn) and starts delivering. */
  start(topics: readonly string[], handlers: ConsumerHandlers): void {
    this.topics = [...topics];
    this.#handlers = handlers;
    this.#active = true;
    this.#group.join(this).catch(() => undefined);
    this.#loop = this.#run();
  }

  /** Ends delivery after the batch in flight, then revokes every partition (awaited) and leaves. */
  async stop(): Promise<void> {
    this.#active = false;
    this.#cluster.changed();
    await this.#loop;
    await this.#group.leave(this).catch(() => undefined);
  }

  expire(): Promise<void> {
    return this.#group.expire(this);
  }

  isMember(): boolean {
    return this.#group.isMember(this);
  }

  get paused(): TopicPartition[] {
    return [...this.#paused].map((k) => {
      const i = k.lastIndexOf('/');
      return { topic: k.slice(0, i), partition: Number(k.slice(i + 1)) };
    });
  }

  seek(tp: TopicPartition, offset: number): void {
    const k = tpKey(tp.topic, tp.partition);
    if (!this.#active || !this.owned.has(k)) return; // not ours: its next owner starts from the commit
    this.#position.set(k, offset);
    this.#seeks.set(k, (this.#seeks.get(k) ?? 0) + 1);
    this.#cluster.changed();
  }

  pause(tps: readonly TopicPartition[]): void {
    for (const tp of tps) this.#paused.add(tpKey(tp.topic, tp.partition));
  }

  resume(tps: readonly TopicPartition[]): void {
    for (const tp of tps) this.#paused.delete(tpKey(tp.topic, tp.partition));
    this.#cluster.changed();
  }

  revoke(tps: TopicPartition[], lost: boolean): Promise<void> {
    return this.#withTurn(async () => {
      try {
        await this.#handlers?.onRevoke(tps, lost);
      } catch (err) {
        this.#errors.push(err);
      }
      for (const tp of tps) {
        const k = tpKey(tp.topic, tp.partition);
        this.owned.delete(k);
        this.#position.delete(k);
      }
      this.#cluster.changed();
    });
  }

  assign(tps: TopicPartition[]): Promise<void> {
    return this.#withTurn(async () => {
      for (const tp of tps) {
        const k = tpKey(tp.topic, tp.partition);
        this.owned.set(k, tp);
        // auto.offset.reset = earliest: never committed starts at the log start
        this.#position.set(k, Math.max(0, this.#group.committed(tp)));
      }
      try {
        await this.#handlers?.onAssign(tps);
      } catch (err) {
        this.#errors.push(err);
      }
      this.#cluster.changed();
    });
  }

  #withTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(fn);
    this.#turn = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  async #run(): Promise<void> {
    while (this.#active) {
      const since = this.#cluster.version;
      const outcome = await this.#withTurn(() => this.#deliverOne());
      if (outcome === 'failed') await new Promise((resolve) => setTimeout(resolve, REDELIVERY_BACKOFF_MS));
      else if (outcome === 'none') {
        if (this.#cluster.version === since) this.#becomeIdle();
        await this.#cluster.waitForChange(since);
        this.#idle = false;
      }
    }
    this.#becomeIdle();
  }

  #becomeIdle(): void {
    this.#idle = true;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves when no batch is in flight and no owned, unpaused partition has a record to deliver. */
  idle(): Promise<void> {
    if (this.#idle || this.#loop === undefined) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Delivers one batch of the next partition (round robin) that has records to read. */
  async #deliverOne(): Promise<'delivered' | 'none' | 'failed'> {
    const handlers = this.#handlers;
    if (!this.#active || handlers === undefined) return 'none';
    const tps = this.assignment;
    for (let i = 0; i < tps.length; i++) {
      const tp = tps[(this.#cursor + i) % tps.length] as TopicPartition;
      const k = tpKey(tp.topic, tp.partition);
      const log = this.#cluster.log(tp.topic, tp.partition);
      if (this.#paused.has(k) || log === undefined) continue;
      const from = this.#position.get(k) ?? 0;
      const { records, next } = log.read(from, this.#maxBatchSize, 'read_committed');
      this.#position.set(k, next);
      const first = records[0];
      if (first === undefined) continue;
      this.#cursor = (this.#cursor + i + 1) % tps.length;
      const seeks = this.#seeks.get(k) ?? 0;
      this.#delivered += records.length;
      try {
        const batch = records.map((r) => toInRecord(tp, r));
        await handlers.onBatch(tp.topic, tp.partition, batch, String(log.highWatermark));
        return 'delivered';
      } catch (err) {
        this.#errors.push(err);
        // delivered again from its first record, unless the handler sought elsewhere meanwhile
        if ((this.#seeks.get(k) ?? 0) === seeks && this.owned.has(k)) this.#position.set(k, first.offset);
        return 'failed';
      }
    }
    return 'none';
  }
}
