/**
 * The outbox relay: holds a share of the relay roles (leases.ts), runs one publishing loop per held role
 * (worker.ts), wakes them on NOTIFY (with a poll interval as the fallback), samples the metrics and runs
 * retention (the holder of role 0). Lifecycle: idle -> starting -> running -> closing -> closed; close()
 * is memoised; a failed start() stops what it started.
 */
import { RedfenceError } from '../errors/index.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { DeliveryProducer } from '../kafka/producer.js';
import { type Logger, silentLogger } from '../runtime/logger.js';
import { counts, purgePublished } from './admin.js';
import { type OutboxIdentity, outboxIdentity } from './identity.js';
import { Leases, type Role } from './leases.js';
import { OutboxMetrics } from './metrics.js';
import { type RelayOptions, type ResolvedRelayOptions, resolveRelayOptions } from './options.js';
import { loadPg, maskUrl, missingObject, type PgPool, type PgPoolClient } from './pg.js';
import { checkProgressOwner, ensureProgressTopic } from './progress.js';
import { type OutboxNames, outboxNames } from './schema.js';
import { RoleWorker, type WorkerContext } from './worker.js';

/** The relay's lifecycle: `start()` once, `close()` once (later calls return the same promise). */
export type RelayState = 'idle' | 'starting' | 'running' | 'closing' | 'closed';
const TOPIC_CACHE_MS = 60_000;
const SAMPLE_MS = 2_000;

export class OutboxRelay {
  readonly #options: ResolvedRelayOptions;
  readonly metrics: OutboxMetrics;
  readonly #names: OutboxNames;
  readonly #logger: Logger;
  #state: RelayState = 'idle';
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
  readonly #stopping = new Set<Promise<void>>();
  readonly #validUntil = new Map<number, number>();
  readonly #topics = new Map<string, number>();
  #wake: { promise: Promise<void>; resolve(): void } = deferred();
  #timers: NodeJS.Timeout[] = [];
  #ticking: Promise<void> | undefined;
  #lastRetention = 0;
  #closing: Promise<void> | undefined;

  constructor(options: RelayOptions) {
    this.#options = resolveRelayOptions(options);
    this.#names = outboxNames(this.#options);
    this.#logger = this.#options.logger ?? silentLogger;
    this.metrics = new OutboxMetrics(this.#options.metrics);
  }

  get state(): RelayState {
    return this.#state;
  }

  /** The id this relay writes as the owner of its roles (`relayId`, or one made at construction). */
  get relayId(): string {
    return this.#options.relayId;
  }

  /** The roles this relay publishes now. */
  get roles(): number[] {
    return [...this.#workers.keys()].sort((a, b) => a - b);
  }

  async start(): Promise<void> {
    if (this.#state !== 'idle')
      throw new RedfenceError('RF_INVALID_STATE', `start() called on a relay that is ${this.#state}`);
    this.#state = 'starting';
    const o = this.#options;
    try {
      const pg = await loadPg();
      const pool = new pg.Pool({
        connectionString: o.databaseUrl,
        max: 12,
        connectionTimeoutMillis: 10_000,
        // pg_stat_activity names the relay (an application_name in the URL wins)
        application_name: `redfence-outbox ${o.relayId}`.slice(0, 63),
      });
      pool.on('error', () => undefined);
      this.#pool = pool;
      this.#leases = new Leases(pool, this.#names, o.relayId, o.leaseMs);
      try {
        this.#roles = await this.#leases.roleCount();
        this.#identity = await outboxIdentity(pool, this.#names);
      } catch (err) {
        if (RedfenceError.is(err)) throw err;
        if (missingObject(err))
          throw new RedfenceError(
            'RF_OUTBOX_MISSING',
            `no outbox ${this.#names.label} in ${maskUrl(o.databaseUrl)}: run redfence outbox init`,
            { cause: err },
          );
        throw new RedfenceError('RF_POSTGRES_UNAVAILABLE', `PostgreSQL: ${(err as Error).message}`, {
          cause: err,
        });
      }
      this.#admin = new KafkaAdmin(o.clientProperties);
      // the first Kafka call: refused credentials are RF_KAFKA_AUTH within seconds (the admin's watch)
      await this.#admin.describeTopics([o.progressTopic]);
      if (o.mode === 'exactly-once') {
        await ensureProgressTopic(o.clientProperties, o.progressTopic, this.#roles);
        // before any transactional producer: a relay of another outbox on these names is not fenced
        const all = Array.from({ length: this.#roles }, (_, r) => r);
        try {
          await checkProgressOwner(
            o.clientProperties,
            o.progressTopic,
            all,
            this.#identity as OutboxIdentity,
          );
          this.#ownerChecked = true;
        } catch (err) {
          // unreadable now (a topic just made has no leader yet): each worker checks its own
          // partition before its producer fences anyone, and tries again with backoff
          if (RedfenceError.is(err, 'RF_OUTBOX_NAME_CLASH')) throw err;
        }
      }
      // at-least-once: one idempotent producer per role too (librdkafka's own threads, in parallel)
      await this.#listen();
      this.#state = 'running';
      await this.#tick();
      this.#ownerChecked = false;
      // resolved once the roles taken now can publish (exactly-once: their old holders fenced and
      // their last transactions marked), so rows committed before start() resolved are not behind a
      // recovery still running
      await Promise.all([...this.#workers.values()].map((w) => w.ready));
      this.#timers.push(setInterval(() => void this.#tick(), Math.max(100, Math.floor(o.leaseMs / 3))));
      this.#timers.push(setInterval(() => void this.#sample(), SAMPLE_MS));
      this.#timers.push(setInterval(() => this.#notify(), o.pollIntervalMs));
      for (const t of this.#timers) t.unref();
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  #connect(role: number | undefined): Promise<DeliveryProducer> {
    const o = this.#options;
    return DeliveryProducer.connect(
      {
        ...o.clientProperties,
        partitioner: 'murmur2_random',
        'enable.idempotence': true,
        acks: -1,
        // a batch is handed over at once: waiting for more records only delays it
        'linger.ms': 1,
        'message.max.bytes': Math.max(1_000_000, o.maxMessageBytes + 65_536),
        ...(role === undefined
          ? {}
          : {
              'transactional.id': `${o.transactionalIdPrefix}-${role}`,
              'transaction.timeout.ms': o.transactionTimeoutMs,
              'socket.timeout.ms': Math.min(60_000, o.transactionTimeoutMs),
            }),
        ...o.producerConfig,
      },
      role === undefined ? undefined : o.transactionTimeoutMs,
    );
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
      producer: (role) => this.#connect(o.mode === 'exactly-once' ? role : undefined),
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
    if (this.#state !== 'running') return;
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
        if (w) this.#track(w.stop());
      }
      if (this.#state !== 'running') return;
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
    if (this.#state !== 'running') return;
    try {
      const c = await counts(this.#pool as PgPool, this.#names);
      this.metrics.sample(c.pending, c.oldestPendingSeconds, c.parked);
    } catch {
      // the next sample tries again
    }
  }

  /** Finishes the batches in flight, gives the roles back, disconnects. Memoised. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#state = 'closing';
    for (const t of this.#timers) clearInterval(t);
    await this.#ticking?.catch(() => undefined);
    const workers = [...this.#workers.values(), ...this.#leaving.values()];
    this.#workers.clear();
    this.#leaving.clear();
    await Promise.all([...workers.map((w) => w.stop()), ...this.#stopping]);
    for (const w of workers)
      await this.#leases?.release({ role: w.role, epoch: w.epoch }).catch(() => undefined);
    await this.#leases?.leave().catch(() => undefined);
    await this.#admin?.close();
    this.#listener?.release();
    this.#listener = undefined;
    await this.#pool?.end().catch(() => undefined);
    this.#state = 'closed';
  }
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
