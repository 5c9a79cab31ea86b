/**
 * Idempotency keys with the Idempotency-Key draft's semantics: the first request with a key runs and its
 * response is stored; a duplicate while it runs is refused as in flight (409); the same key with another
 * request fingerprint is refused (422); a duplicate after it finished gets the stored response without
 * running again. Redis is the fast path (one Lua claim per request); with `pg`, a row in PostgreSQL is the
 * durable claim and record (INSERT ... ON CONFLICT DO NOTHING decides who runs), so losing Redis, or
 * Redis being down, never runs a command twice: the row decides. Without `pg`, Redis alone decides and a
 * key Redis loses can run again.
 */
import { randomBytes } from 'node:crypto';
import { RedfenceError } from '../../errors/index.js';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import { KitRecordKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, invalid, MAX_TIMER_MS, shown } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { bytes, checkPolicy, KitScripts } from '../common/scripts.js';
import {
  type IdempotencyCodec,
  type IdempotencyResult,
  type IdempotencyStoreOptions,
  JSON_CODEC,
  NAMES,
  sha256,
} from './options.js';
import { type PgClaim, type PgPool, type PgQueryable, PgRecords } from './pg-records.js';

export { fingerprint } from './options.js';

export class IdempotencyStore<R = unknown> {
  readonly name: string;
  readonly tenant: string;
  readonly ttlMs: number;
  readonly inFlightTtlMs: number;
  readonly #keys: KitRecordKeys;
  readonly #scripts: KitScripts;
  readonly #metrics: KitMetrics;
  readonly #codec: IdempotencyCodec<R>;
  readonly #pg: PgRecords | undefined;
  readonly #pool: PgPool | undefined;
  readonly #table: string | undefined;

  constructor(options: IdempotencyStoreOptions<R>) {
    const o = new Checker('idempotency store').object('', options, NAMES);
    const name = o.name ?? 'default';
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,52}$/.test(name)) {
      throw invalid('idempotency store', `option "name" must match [A-Za-z0-9_.-]{1,52}, got ${shown(name)}`);
    }
    this.name = name;
    const c = new Checker(`idempotency store "${name}"`);
    const redis = c.client<ScriptRedis>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']);
    if (typeof o.tenant !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(o.tenant)) {
      throw invalid(c.where, `option "tenant" must match [A-Za-z0-9_.-]{1,64}, got ${shown(o.tenant)}`);
    }
    this.tenant = o.tenant;
    this.ttlMs = c.integer('ttlMs', o.ttlMs, 1, MAX_TIMER_MS);
    this.inFlightTtlMs = c.integer('inFlightTtlMs', o.inFlightTtlMs, 1, MAX_TIMER_MS);
    if (this.inFlightTtlMs > this.ttlMs) {
      throw invalid(
        c.where,
        `option "inFlightTtlMs" (${this.inFlightTtlMs}) must not exceed "ttlMs" (${this.ttlMs})`,
      );
    }
    const codec = c.object('codec', o.codec, ['encode', 'decode']);
    if (o.codec !== undefined) {
      c.fn('codec.encode', codec.encode ?? 0);
      c.fn('codec.decode', codec.decode ?? 0);
    }
    this.#codec = (o.codec as IdempotencyCodec<R> | undefined) ?? (JSON_CODEC as IdempotencyCodec<R>);
    if (o.pg !== undefined) {
      if (typeof (o.pg as { query?: unknown }).query !== 'function') {
        throw invalid(c.where, 'option "pg" must be a pg Pool (or a client with query()); it lacks query()');
      }
      if (typeof o.table !== 'string' || !PgRecords.TABLE.test(o.table)) {
        throw invalid(
          c.where,
          `option "table" (required with "pg") must be a lower-case name or schema.name, got ${shown(o.table)}`,
        );
      }
      this.#pg = new PgRecords(o.pg as PgQueryable, o.table);
      this.#table = o.table;
      if (typeof (o.pg as { connect?: unknown }).connect === 'function') this.#pool = o.pg as PgPool;
    } else if (o.table !== undefined) {
      throw invalid(c.where, 'option "table" needs option "pg"');
    }
    this.#keys = new KitRecordKeys('idempotency', name, o.tenant, {
      keyEncoding: c.oneOf<KeyEncoding>('keyEncoding', o.keyEncoding, ['auto', 'hash'], 'auto'),
    });
    this.#scripts = new KitScripts(import.meta.url, redis, checkPolicy(c, 'redisPolicy', o.redisPolicy));
    this.#metrics = new KitMetrics(
      name,
      c.object('metrics', o.metrics, ['registry']).registry as MetricsRegistry | undefined,
    );
  }

  get registry(): MetricsRegistry {
    return this.#metrics.registry;
  }

  /** Creates the PostgreSQL table when it does not exist (a no-op without `pg`). */
  async init(): Promise<void> {
    await this.#pg?.init();
  }

  /** Deletes PostgreSQL rows whose response expired; answers how many. */
  async purgeExpired(): Promise<number> {
    return (await this.#pg?.purgeExpired()) ?? 0;
  }

  #outcome(outcome: string): void {
    this.#metrics.inc('idempotency_requests_total', 'Idempotency store requests, by outcome.', { outcome });
  }

  #refuse(code: 'RF_KIT_IDEMPOTENCY_IN_FLIGHT' | 'RF_KIT_IDEMPOTENCY_MISMATCH', key: string): never {
    const inFlight = code === 'RF_KIT_IDEMPOTENCY_IN_FLIGHT';
    this.#outcome(inFlight ? 'in-flight' : 'mismatch');
    const what = inFlight
      ? 'is held by a request that has not finished'
      : 'was used with a different request fingerprint';
    throw new RedfenceError(
      code,
      `idempotency store "${this.name}" tenant=${this.tenant}: key#${sha256(key).slice(0, 12)} ${what}`,
      { details: { status: inFlight ? 409 : 422 } },
    );
  }

  #replay(text: string): IdempotencyResult<R> {
    this.#outcome('replayed');
    return { status: 'done', response: this.#codec.decode(text), replayed: true };
  }

  #checkCall(key: unknown, requestFingerprint: unknown, fn: unknown): void {
    const bad = (m: string): never => {
      throw new RedfenceError('RF_INVALID_ARGUMENT', `idempotency store "${this.name}": ${m}`);
    };
    if (typeof key !== 'string' || key.length === 0 || key.length > 255)
      bad('the key must be a string of 1 to 255 characters');
    if (typeof requestFingerprint !== 'string' || requestFingerprint.length === 0)
      bad('the fingerprint must be a non-empty string');
    if (typeof fn !== 'function') bad('fn must be a function');
  }

  /** Step 1, the Redis claim: a replay, a refusal (thrown), or go on (`redisUp` false: Redis is down). */
  async #fast(c: Call): Promise<IdempotencyResult<R> | { redisUp: boolean }> {
    try {
      const reply = await this.#scripts.run('idemClaim', [c.record], [c.fp, this.inFlightTtlMs, c.token]);
      const verdict = bytes(reply, 0)?.toString();
      if (verdict === 'mismatch') this.#refuse('RF_KIT_IDEMPOTENCY_MISMATCH', c.key);
      if (verdict === 'inflight') {
        // The Redis claim may be a leftover whose request finished through PostgreSQL: the row says.
        const row = await this.#pg?.peek(this.tenant, this.name, c.keyHash, c.fp);
        if (row?.verdict === 'mismatch') this.#refuse('RF_KIT_IDEMPOTENCY_MISMATCH', c.key);
        if (row?.verdict !== 'done') this.#refuse('RF_KIT_IDEMPOTENCY_IN_FLIGHT', c.key);
        await this.#store(c, row.response, true, row.remainingMs);
        return this.#replay(row.response);
      }
      if (verdict === 'done') return this.#replay((bytes(reply, 1) as Buffer).toString('utf8'));
      return { redisUp: true };
    } catch (err) {
      if (this.#pg === undefined || !RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) {
        if (RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) this.#metrics.redisError('idempotency', 'closed');
        throw err;
      }
      // Redis down: the PostgreSQL row alone decides.
      this.#metrics.redisError('idempotency', 'open');
      return { redisUp: false };
    }
  }

  /** Step 2's answer when the row was not claimed: a refusal (thrown) or the durable response. */
  async #decided(c: Call, claim: PgClaim, redisUp: boolean): Promise<IdempotencyResult<R>> {
    if (redisUp) await this.#release(c);
    if (claim.verdict === 'mismatch') this.#refuse('RF_KIT_IDEMPOTENCY_MISMATCH', c.key);
    if (claim.verdict !== 'done') this.#refuse('RF_KIT_IDEMPOTENCY_IN_FLIGHT', c.key);
    // Redis lost the key (or is down): copy the durable response back to the fast path, to expire
    // there when the durable record does.
    if (redisUp) await this.#store(c, claim.response, true, claim.remainingMs);
    return this.#replay(claim.response);
  }

  #call(key: string, requestFingerprint: string): Call {
    return {
      key,
      record: this.#keys.part(key, 'r'),
      fp: sha256(requestFingerprint),
      token: randomBytes(12).toString('hex'),
      keyHash: sha256(key),
    };
  }

  /**
   * Runs `fn` once per idempotency key: the first request runs it and stores its response; later ones
   * with the same fingerprint replay it (`replayed: true`). Throws RF_KIT_IDEMPOTENCY_IN_FLIGHT (409)
   * while the first runs, RF_KIT_IDEMPOTENCY_MISMATCH (422) for another fingerprint. If `fn` throws,
   * the claim is given up (nothing stored) and the error rethrown, so a retry runs it again.
   */
  async run(key: string, requestFingerprint: string, fn: () => Promise<R>): Promise<IdempotencyResult<R>> {
    this.#checkCall(key, requestFingerprint, fn);
    const c = this.#call(key, requestFingerprint);
    const fast = await this.#fast(c);
    if ('status' in fast) return fast;
    const { redisUp } = fast;

    if (this.#pg !== undefined) {
      let claim: PgClaim;
      try {
        claim = await this.#pg.claim(
          this.tenant,
          this.name,
          c.keyHash,
          c.fp,
          c.token,
          this.inFlightTtlMs,
          this.ttlMs,
        );
      } catch (err) {
        if (redisUp) await this.#release(c);
        throw err;
      }
      if (claim.verdict !== 'claimed') return await this.#decided(c, claim, redisUp);
    }

    let response: R;
    try {
      response = await fn();
    } catch (err) {
      this.#outcome('failed');
      await this.#pg?.release(this.tenant, this.name, c.keyHash, c.token).catch(() => {});
      if (redisUp) await this.#release(c);
      throw err;
    }
    const text = this.#codec.encode(response);
    let recorded = false;
    if (this.#pg !== undefined) {
      // Durable first: once this row is done, no later request runs fn, whatever Redis holds.
      // If PostgreSQL fails here the command has run: its response is still returned and copied to
      // Redis, and the row stays in flight until inFlightTtlMs (counted as outcome="unrecorded").
      const stored = await this.#pg
        .complete(this.tenant, this.name, c.keyHash, c.token, text, this.ttlMs)
        .catch(() => undefined);
      if (stored === undefined) this.#outcome('unrecorded');
      else if (!stored) this.#outcome('late');
      recorded = stored === true;
    }
    // Forced only when the durable record is ours: then no claim in Redis can be a live one. Not tried
    // while Redis is down (each try would wait out the deadline); the next replay copies it back.
    if (redisUp) await this.#store(c, text, recorded);
    this.#outcome('ran');
    return { status: 'done', response, replayed: false };
  }

  /**
   * `run` with the command inside the PostgreSQL transaction that records it: `fn(client)` does its
   * writes on `client`, and the row (claim and response) commits or rolls back with them. A crash or a
   * throw rolls both back, so the command never runs twice and never half-runs, whatever the timing:
   * a duplicate reaching PostgreSQL while the first is open waits up to `inFlightTtlMs` for it (then
   * 409), and replays once it committed. Needs `pg` to be a pool (`connect()`).
   */
  async runInTransaction<C extends PgQueryable = PgQueryable>(
    key: string,
    requestFingerprint: string,
    fn: (client: C) => Promise<R>,
  ): Promise<IdempotencyResult<R>> {
    this.#checkCall(key, requestFingerprint, fn);
    const pool = this.#pool;
    if (pool === undefined) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `idempotency store "${this.name}": runInTransaction needs option "pg" to be a pool with connect()`,
      );
    }
    const c = this.#call(key, requestFingerprint);
    const fast = await this.#fast(c);
    if ('status' in fast) return fast;
    const { redisUp } = fast;
    let client: (PgQueryable & { release(err?: Error | boolean): void }) | undefined;
    let text: string;
    let response: R;
    let ran = false;
    try {
      client = await pool.connect().catch((err: unknown) => {
        throw new RedfenceError(
          'RF_POSTGRES_UNAVAILABLE',
          `idempotency store "${this.name}": no PostgreSQL connection`,
          {
            cause: err,
          },
        );
      });
      const records = new PgRecords(client, this.#table as string);
      await records.begin(this.inFlightTtlMs);
      const claim = await records.claim(
        this.tenant,
        this.name,
        c.keyHash,
        c.fp,
        c.token,
        this.inFlightTtlMs,
        this.ttlMs,
      );
      if (claim.verdict !== 'claimed') {
        await records.rollback();
        return await this.#decided(c, claim, redisUp);
      }
      await records.unboundLockWait(); // fn's own statements wait as the session says
      ran = true;
      response = await fn(client as unknown as C);
      text = this.#codec.encode(response);
      if (!(await records.complete(this.tenant, this.name, c.keyHash, c.token, text, this.ttlMs))) {
        throw new RedfenceError(
          'RF_POSTGRES_UNAVAILABLE',
          `idempotency store "${this.name}": the claim row was lost`,
        );
      }
      await records.commit();
    } catch (err) {
      await client?.query('ROLLBACK').catch(() => {});
      if (redisUp) await this.#release(c);
      if (!ran && PgRecords.lockTimedOut(err)) this.#refuse('RF_KIT_IDEMPOTENCY_IN_FLIGHT', c.key);
      if (ran) this.#outcome('failed');
      throw err;
    } finally {
      client?.release();
    }
    if (redisUp) await this.#store(c, text, true);
    this.#outcome('ran');
    return { status: 'done', response, replayed: false };
  }

  /** Best effort: the fast path only; a failure leaves PostgreSQL (or the claim's expiry) to decide. */
  async #store(c: Call, text: string, force: boolean, ttlMs = this.ttlMs): Promise<void> {
    try {
      const r = await this.#scripts.run(
        'idemComplete',
        [c.record],
        [c.fp, text, ttlMs, c.token, force ? '1' : '0'],
      );
      if (r === 0 && this.#pg === undefined) this.#outcome('late');
    } catch (err) {
      if (!RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) throw err;
      this.#metrics.redisError('idempotency', 'open');
    }
  }

  async #release(c: Call): Promise<void> {
    try {
      await this.#scripts.run('idemRelease', [c.record], [c.token]);
    } catch (err) {
      if (!RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) throw err;
      // The claim expires by itself after inFlightTtlMs.
      this.#metrics.redisError('idempotency', 'open');
    }
  }
}

/** One request's names: its Redis record key, fingerprint hash, token and key digest. */
interface Call {
  key: string;
  record: string;
  fp: string;
  token: string;
  keyHash: string;
}
