/**
 * The outbox relay: holds a share of the relay roles (leases.ts), runs one publishing loop per held role
 * (worker.ts), wakes them on NOTIFY (with a poll interval as the fallback), samples the metrics and runs
 * retention (the holder of role 0). Its lifecycle is the one of every runtime (src/runtime/lifecycle.ts):
 * idle -> starting -> running -> closing -> closed; a failed start() stops what it started.
 * - close() (memoised): the loops finish their batches in flight, the roles are given back, disconnect.
 * - destroy(err?) (idempotent; during close() it cuts the drain short): the loops stop at once without
 *   finishing their batches (RoleWorker.abandon: nothing more is marked published, producers are not
 *   flushed), then the roles are given back at once (released, so another relay need not wait for the
 *   lease to run out; if PostgreSQL does not answer they expire after leaseMs), disconnect. Safe to hand
 *   over at once in both modes: exactly-once, the next holder fences the role's transactional id before
 *   it reads the role's last progress record (a commit the destroyed relay had in flight is either
 *   marked from it or aborted, so its rows are published once); at-least-once, rows in flight may be
 *   published twice, and the first appearance of each row stays in order per aggregate.
 * No consumer group: the roles are leases in PostgreSQL.
 */
import { RedfenceError } from '../errors/index.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Lifecycle, type RuntimeState } from '../runtime/lifecycle.js';
import { type Logger, silentLogger } from '../runtime/logger.js';
import { instanceRegistration } from '../runtime/registry.js';
import { counts, purgePublished } from './admin.js';
import type { OutboxIdentity } from './identity.js';
import type { Leases, Role } from './leases.js';
import { OutboxMetrics } from './metrics.js';
import { type RelayOptions, type ResolvedRelayOptions, resolveRelayOptions } from './options.js';
import type { PgPool, PgPoolClient } from './pg.js';
import { checkProgressOwner, ensureProgressTopic } from './progress.js';
import { connectProducer, openDatabase } from './relay-clients.js';
import { type OutboxNames, outboxNames } from './schema.js';
import { RoleWorker, type WorkerContext } from './worker.js';

/** The relay's lifecycle: `start()` once, `close()` and `destroy()` once (later calls return the same promise). */
export type RelayState = RuntimeState;
const TOPIC_CACHE_MS = 60_000;
const SAMPLE_MS = 2_000;

export class OutboxRelay {
  readonly #options: ResolvedRelayOptions;
  readonly metrics: OutboxMetrics;
  readonly #names: OutboxNames;
  readonly #logger: Logger;
  readonly #life: Lifecycle;
  #pool: PgPool | undefined;
  #listener: PgPoolClient | undefined;
  #leases: Leases | undefined;
  #admin: KafkaAdmin | undefined;
  #roles = 0;
  #identity: OutboxIdentity | undefined;
  /** True while start() takes its first roles, just after it checked every progress partition. */
  #ownerChecked = false;
  readonly #workers = new Map<number, RoleWorker>();
  /** Roles being given back: their loop is stopping; released after. */
  readonly #leaving = new Map<number, RoleWorker>();
  /** Roles lost to another relay: their loop is stopping; not released (not this relay's any more). */
  readonly #retiring = new Set<RoleWorker>();
  readonly #stopping = new Set<Promise<void>>();
  readonly #validUntil = new Map<number, number>();
  readonly #topics = new Map<string, number>();
  #wake: { promise: Promise<void>; resolve(): void } = deferred();
  #timers: NodeJS.Timeout[] = [];
  #ticking: Promise<void> | undefined;
  #lastRetention = 0;

  constructor(options: RelayOptions) {
    this.#options = resolveRelayOptions(options);
    this.#names = outboxNames(this.#options);
    this.#logger = this.#options.logger ?? silentLogger;
    this.metrics = new OutboxMetrics(this.#options.metrics);
    this.#life = new Lifecycle({
      name: 'outbox relay',
      log: this.#logger,
      logFields: () => ({ relay: this.relayId }),
      startUp: () => this.#startUp(),
      quiesce: () => {
        for (const t of this.#timers) clearInterval(t);
      },
      drain: () => this.#drain(),
      stop: () => this.#stop(),
      registration: instanceRegistration(this.#options.redis, 'relay', () => ({
        id: this.relayId,
        module: this.#names.label,
        mode: this.#options.mode,
      })),
    });
  }

  get state(): RelayState {
    return this.#life.state;
  }

  /** The id this relay writes as the owner of its roles (`relayId`, or one made at construction). */
  get relayId(): string {
    return this.#options.relayId;
  }

  /** The roles this relay publishes now. */
  get roles(): number[] {
    return [...this.#workers.keys()].sort((a, b) => a - b);
  }

  /**
   * Connects, takes its share of the roles and resolves once they can publish (exactly-once: their
   * old holders fenced and their last transactions marked). Call once (RF_INVALID_STATE otherwise); a
   * failure stops what was started and leaves the relay closed.
   */
  start(): Promise<void> {
    return this.#life.start();
  }

  /** Finishes the batches in flight, gives the roles back, disconnects. Every call returns the same promise. */
  close(): Promise<void> {
    return this.#life.close();
  }

  /**
   * Stops at once, without finishing the batches in flight (see the file comment): their rows stay
   * pending and the next holder of their roles publishes them (exactly-once: once). Gives the roles
   * back and disconnects. Idempotent; during close() it cuts the drain short; before start() the relay
   * is closed and never starts. `err`, when given, is logged as the reason.
   */
  destroy(err?: Error): Promise<void> {
    return this.#life.destroy(err);
  }

  async #startUp(): Promise<void> {
    const o = this.#options;
    const db = await openDatabase(o, this.#names, (pool, leases) => {
      this.#pool = pool;
      this.#leases = leases;
    });
    this.#roles = db.roles;
    this.#identity = db.identity;
    this.#life.stillStarting();
    this.#admin = new KafkaAdmin(o.clientProperties);
    // the first Kafka call: refused credentials are RF_KAFKA_AUTH within seconds (the admin's watch)
    await this.#admin.describeTopics([o.progressTopic]);
    if (o.mode === 'exactly-once') {
      await ensureProgressTopic(o.clientProperties, o.progressTopic, this.#roles);
      // before any transactional producer: a relay of another outbox on these names is not fenced
      const all = Array.from({ length: this.#roles }, (_, r) => r);
      try {
        await checkProgressOwner(o.clientProperties, o.progressTopic, all, db.identity);
        this.#ownerChecked = true;
      } catch (err) {
        // unreadable now (a topic just made has no leader yet): each worker checks its own
        // partition before its producer fences anyone, and tries again with backoff
        if (RedfenceError.is(err, 'RF_OUTBOX_NAME_CLASH')) throw err;
      }
    }
    // at-least-once: one idempotent producer per role too (librdkafka's own threads, in parallel)
    this.#life.stillStarting();
    await this.#listen();
    await this.#tick();
    this.#ownerChecked = false;
    // resolved once the roles taken now can publish (exactly-once: their old holders fenced and their
    // last transactions marked), so rows committed before start() resolved are not behind a recovery
    // still running; a close() or destroy() meanwhile ends the wait
    await Promise.race([
      Promise.all([...this.#workers.values()].map((w) => w.ready)),
      aborted(this.#life.signal),
    ]);
    this.#life.stillStarting();
    this.#timers.push(setInterval(() => void this.#tick(), Math.max(100, Math.floor(o.leaseMs / 3))));
    this.#timers.push(setInterval(() => void this.#sample(), SAMPLE_MS));
    this.#timers.push(setInterval(() => this.#notify(), o.pollIntervalMs));
    for (const t of this.#timers) t.unref();
  }

  async #listen(): Promise<void> {
    const client = await (this.#pool as PgPool).connect();
    client.on('error', () => {
      // a lost LISTEN connection: polling goes on; the next tick listens again
      if (this.#listener === client) this.#listener = undefined;
      client.release(true);
    });
    client.on('notification', () => this.#notify());
    await client.query(`LISTEN "${this.#names.channel}"`);
    this.#listener = client;
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = deferred();
    w.resolve();
  }

  #context(): WorkerContext {
    const o = this.#options;
    return {
      db: this.#pool as PgPool,
      names: this.#names,
      roles: this.#roles,
      mode: o.mode,
      topicTemplate: o.topicTemplate,
      batchSize: o.batchSize,
      maxAttempts: o.maxAttempts,
      maxMessageBytes: o.maxMessageBytes,
      transactionIntervalMs: o.mode === 'exactly-once' ? o.transactionIntervalMs : 0,
      progressTopic: o.progressTopic,
      identity: this.#identity as OutboxIdentity,
      ownerChecked: this.#ownerChecked,
      clientProperties: o.clientProperties,
      logger: this.#logger,
      metrics: this.metrics,
      producer: (role) => connectProducer(o, o.mode === 'exactly-once' ? role : undefined),
      existing: (topics) => this.#existing(topics),
      idle: (stop) => Promise.race([this.#wake.promise, stop]),
      leaseValid: (role) => (this.#validUntil.get(role) ?? 0) > performance.now(),
    };
  }

  async #existing(topics: readonly string[]): Promise<ReadonlySet<string>> {
    const now = performance.now();
    const unknown = topics.filter((t) => (this.#topics.get(t) ?? 0) < now);
    if (unknown.length > 0) {
      const found = await (this.#admin as KafkaAdmin).describeTopics(unknown);
      for (const t of found.keys()) this.#topics.set(t, now + TOPIC_CACHE_MS);
    }
    return new Set(topics.filter((t) => (this.#topics.get(t) ?? 0) >= now));
  }

  /** One lease round; never two at once. */
  #tick(): Promise<void> {
    this.#ticking ??= this.#leaseRound().finally(() => {
      this.#ticking = undefined;
    });
    return this.#ticking;
  }

  async #leaseRound(): Promise<void> {
    if (!this.#life.accepting) return;
    const leases = this.#leases as Leases;
    const o = this.#options;
    try {
      // fenced or broken: give the role up; its next holder (maybe this relay again) starts clean
      for (const w of [...this.#workers.values()]) if (w.fatal !== undefined) this.#giveBack(w);
      if (this.#listener === undefined) await this.#listen().catch(() => undefined);
      // Roles being given back are still renewed: nobody else may take them before their loop stopped.
      const all = [...this.#workers.values(), ...this.#leaving.values()];
      const held: Role[] = all.map((w) => ({ role: w.role, epoch: w.epoch }));
      const before = performance.now();
      const t = await leases.tick(held);
      // Valid by this relay's clock a little less long than the database's lease.
      const until = before + o.leaseMs * 0.8;
      for (const r of t.lost) {
        const w = this.#workers.get(r.role) ?? this.#leaving.get(r.role);
        this.#workers.delete(r.role);
        this.#leaving.delete(r.role);
        this.#validUntil.delete(r.role);
        this.metrics.role('lost', this.#workers.size);
        this.#logger.warn({ role: r.role }, 'outbox role lost to another relay');
        // not awaited: a batch finishing against a slow Kafka must not hold up the other roles' renewal
        if (w) {
          this.#retiring.add(w);
          this.#track(w.stop().finally(() => this.#retiring.delete(w)));
        }
      }
      if (!this.#life.accepting) {
        // closing or destroyed meanwhile: what this round claimed is given back at once
        await Promise.all(t.gained.map((r) => leases.release(r).catch(() => undefined)));
        return;
      }
      for (const r of t.kept) this.#validUntil.set(r.role, until);
      for (const r of t.gained) {
        this.#validUntil.set(r.role, until);
        const w = new RoleWorker(this.#context(), r.role, r.epoch);
        this.#workers.set(r.role, w);
        w.start();
        this.metrics.role('gained', this.#workers.size);
        this.#logger.info({ role: r.role, epoch: r.epoch }, 'outbox role gained');
      }
      const surplus = t.surplus - this.#leaving.size;
      const extra = [...this.#workers.values()]
        .sort((a, b) => b.role - a.role)
        .slice(0, Math.max(0, surplus));
      for (const w of extra) this.#giveBack(w);
      if (this.#workers.has(0) && o.retentionMs > 0 && performance.now() - this.#lastRetention > 5_000) {
        this.#lastRetention = performance.now();
        const deleted = await purgePublished(
          this.#pool as PgPool,
          this.#names,
          o.retentionMs,
          o.retentionBatch,
        );
        this.metrics.deleted(deleted);
      }
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'outbox lease round failed');
    }
  }

  /** Stops a role's loop, then releases the role (renewed meanwhile); not awaited by the lease round. */
  #giveBack(w: RoleWorker): void {
    this.#workers.delete(w.role);
    this.#leaving.set(w.role, w);
    this.#track(
      w.stop().then(async () => {
        if (this.#leaving.get(w.role) !== w) return; // lost meanwhile
        await (this.#leases as Leases).release({ role: w.role, epoch: w.epoch });
        this.#leaving.delete(w.role);
        this.#validUntil.delete(w.role);
        this.metrics.role('released', this.#workers.size);
      }),
    );
  }

  #track(p: Promise<void>): void {
    const q = p.catch((err: unknown) => {
      this.#logger.warn({ err: (err as Error).message }, 'outbox role stop failed');
    });
    this.#stopping.add(q);
    void q.finally(() => this.#stopping.delete(q));
  }

  async #sample(): Promise<void> {
    if (this.#life.state !== 'running') return;
    try {
      const c = await counts(this.#pool as PgPool, this.#names);
      this.metrics.sample(c.pending, c.oldestPendingSeconds, c.parked);
    } catch {
      // the next sample tries again
    }
  }

  /** close(): the loops finish their batches in flight, then the roles are given back. */
  async #drain(): Promise<void> {
    await this.#ticking?.catch(() => undefined);
    const mine = [...this.#workers.values(), ...this.#leaving.values()];
    await Promise.all([...mine.map((w) => w.stop()), ...this.#stopping]);
    // a destroy() meanwhile (its stop step) releases them and ends the pool: these may fail
    await this.#release(mine);
    this.#workers.clear();
    this.#leaving.clear();
  }

  /**
   * After the drain (nothing left to stop), at once on destroy() and after a failed start: every loop
   * still running is abandoned, the roles given back, then disconnect.
   */
  async #stop(): Promise<void> {
    const mine = [...this.#workers.values(), ...this.#leaving.values()];
    const abandonRetiring = () => Promise.all([...this.#retiring].map((w) => w.abandon()));
    await Promise.all([...mine.map((w) => w.abandon()), abandonRetiring()]);
    // a lease round in flight starts no loop now (not accepting), but may still lose one
    await this.#ticking?.catch(() => undefined);
    await abandonRetiring();
    await this.#release(mine);
    this.#workers.clear();
    this.#leaving.clear();
    await this.#admin?.close();
    this.#listener?.release();
    this.#listener = undefined;
    await this.#pool?.end().catch(() => undefined);
  }

  /** Gives roles back (their loops have stopped) and leaves the relay table; failures are left to expire. */
  async #release(workers: readonly RoleWorker[]): Promise<void> {
    const leases = this.#leases;
    if (leases === undefined) return;
    await Promise.all(
      workers.map((w) => leases.release({ role: w.role, epoch: w.epoch }).catch(() => undefined)),
    );
    await leases.leave().catch(() => undefined);
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
