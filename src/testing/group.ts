/**
 * A consumer group: committed offsets and members. Membership changes are rebalanced one at a time,
 * cooperatively and sticky (as cooperative-sticky does): a partition stays with its owner unless the
 * balance needs it elsewhere; what moves is first revoked from its owner (its onRevoke awaited), then
 * assigned to its new owner (its onAssign awaited). A partition never has two owners.
 */
import { type CommitOffset, type CommittedOffset, type TopicPartition, tpKey } from '../kafka/types.js';

/** What the group needs from a consumer. */
export interface Member {
  readonly topics: readonly string[];
  /** Partitions owned now, by tpKey. */
  readonly owned: ReadonlyMap<string, TopicPartition>;
  /** False once the member is stopping: it takes no new partitions. */
  readonly active: boolean;
  revoke(partitions: TopicPartition[], lost: boolean): Promise<void>;
  assign(partitions: TopicPartition[]): Promise<void>;
}

export class Group {
  readonly #partitionCount: (topic: string) => number | undefined;
  readonly #committed = new Map<string, CommittedOffset>();
  readonly #members: Member[] = [];
  #queue: Promise<void> = Promise.resolve();
  #pending = 0;
  /** Bumped by every completed rebalance. */
  generation = 0;

  constructor(partitionCount: (topic: string) => number | undefined) {
    this.#partitionCount = partitionCount;
  }

  /** The committed offset (the next to consume) of a partition, -1 when none. */
  committed(tp: TopicPartition): number {
    return this.committedWithMetadata(tp).offset;
  }

  /** The committed offset with its metadata; `{ offset: -1, metadata: '' }` when none. */
  committedWithMetadata(tp: TopicPartition): CommittedOffset {
    return this.#committed.get(tpKey(tp.topic, tp.partition)) ?? { offset: -1, metadata: '' };
  }

  /** Stores each offset with its metadata ('' when none given, as the broker stores it). */
  commit(offsets: readonly CommitOffset[]): void {
    for (const o of offsets)
      this.#committed.set(tpKey(o.topic, o.partition), { offset: o.offset, metadata: o.metadata ?? '' });
  }

  /** A topic's committed offsets by partition (partitions without a commit are absent). */
  committedFor(topic: string): Map<number, number> {
    const out = new Map<number, number>();
    for (const [k, v] of this.#committed) {
      const i = k.lastIndexOf('/');
      if (k.slice(0, i) === topic) out.set(Number(k.slice(i + 1)), v.offset);
    }
    return new Map([...out].sort((a, b) => a[0] - b[0]));
  }

  isMember(member: Member): boolean {
    return this.#members.includes(member);
  }

  /** The member joins; its first assignment comes in a later turn of the event loop (as over a network). */
  join(member: Member): Promise<void> {
    this.#members.push(member);
    return this.#enqueue(async () => {
      await new Promise((resolve) => setImmediate(resolve));
      await this.#rebalance();
    });
  }

  /**
   * The member's partitions are revoked (awaited) and it leaves; the others then share its
   * partitions in a rebalance of their own (not awaited here: see settled()).
   */
  leave(member: Member): Promise<void> {
    const left = this.#enqueue(async () => {
      const owned = [...member.owned.values()];
      if (owned.length > 0) await member.revoke(owned, false);
      const i = this.#members.indexOf(member);
      if (i >= 0) this.#members.splice(i, 1);
    });
    this.#enqueue(() => this.#rebalance()).catch(() => undefined);
    return left;
  }

  /** The member missed its session: its partitions are lost (never to be committed), then reassigned. */
  expire(member: Member): Promise<void> {
    return this.#enqueue(async () => {
      const owned = [...member.owned.values()];
      if (owned.length > 0) await member.revoke(owned, true);
      await this.#rebalance();
    });
  }

  /** A topic was created: members subscribed to it get its partitions. */
  topicsChanged(): void {
    if (this.#members.length > 0) this.#enqueue(() => this.#rebalance()).catch(() => undefined);
  }

  /** True while a rebalance is queued or running. */
  get busy(): boolean {
    return this.#pending > 0;
  }

  /** Resolves once no rebalance is queued or running. */
  async settled(): Promise<void> {
    while (this.#pending > 0) await this.#queue;
  }

  #enqueue(job: () => Promise<void>): Promise<void> {
    this.#pending++;
    const run = this.#queue.then(job).finally(() => {
      this.#pending--;
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** The sticky target assignment of the active members. */
  #target(): Map<Member, Map<string, TopicPartition>> {
    const active = this.#members.filter((m) => m.active);
    const target = new Map(active.map((m) => [m, new Map<string, TopicPartition>()]));
    if (active.length === 0) return target;
    const topics = [...new Set(active.flatMap((m) => m.topics))].sort();
    const all = topics.flatMap((topic) =>
      Array.from({ length: this.#partitionCount(topic) ?? 0 }, (_, partition) => ({ topic, partition })),
    );
    const base = Math.floor(all.length / active.length);
    const extra = all.length % active.length;
    // The members holding the most keep the extra partitions: fewer move.
    const byLoad = [...active].sort((a, b) => b.owned.size - a.owned.size);
    const cap = new Map(byLoad.map((m, i) => [m, base + (i < extra ? 1 : 0)]));
    const unplaced: TopicPartition[] = [];
    for (const tp of all) {
      const k = tpKey(tp.topic, tp.partition);
      const owner = active.find((m) => m.owned.has(k) && m.topics.includes(tp.topic));
      const mine = owner && target.get(owner);
      if (owner && mine && mine.size < (cap.get(owner) ?? 0)) mine.set(k, tp);
      else unplaced.push(tp);
    }
    for (const tp of unplaced) {
      const candidates = active.filter((m) => m.topics.includes(tp.topic));
      const spare = candidates.filter((m) => (target.get(m)?.size ?? 0) < (cap.get(m) ?? 0));
      const pool = spare.length > 0 ? spare : candidates;
      const pick = pool.reduce((a, b) => ((target.get(b)?.size ?? 0) < (target.get(a)?.size ?? 0) ? b : a));
      target.get(pick)?.set(tpKey(tp.topic, tp.partition), tp);
    }
    return target;
  }

  async #rebalance(): Promise<void> {
    const target = this.#target();
    const none = new Map<string, TopicPartition>();
    // Revocations first, each member in parallel; only then does anyone get what moved.
    await Promise.all(
      this.#members.map((m) => {
        const keep = target.get(m) ?? none;
        const go = [...m.owned].filter(([k]) => !keep.has(k)).map(([, tp]) => tp);
        return go.length > 0 ? m.revoke(go, false) : undefined;
      }),
    );
    await Promise.all(
      [...target].map(([m, tps]) => {
        const add = [...tps].filter(([k]) => !m.owned.has(k)).map(([, tp]) => tp);
        return add.length > 0 ? m.assign(add) : undefined;
      }),
    );
    this.generation++;
  }
}
