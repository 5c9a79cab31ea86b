/**
 * Fenced locks: `acquire` returns a token and a fencing number that grows with every acquisition of the
 * resource; extend and release act only for the token that holds the lock (Lua); held locks are
 * extended automatically, and a lock that is lost (taken after a pause, or unreachable past its TTL)
 * aborts its `signal` and calls `onLockLost`. A lock alone cannot stop a paused holder from writing
 * after it expired: the protected store must refuse older fencing numbers (FencedStore, or the same
 * compare in the store's own transaction). See docs/kit.md.
 */
import { randomBytes } from 'node:crypto';
import { RedfenceError } from '../../errors/index.js';
import { type KitKey, KitKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { MAX_TIMER_MS } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { int, KitScripts } from '../common/scripts.js';
import { checkEvictionPolicy } from './eviction.js';
import {
  type LockLostReason,
  type LockOptions,
  type ResolvedLockOptions,
  resolveLockOptions,
} from './options.js';

export interface AcquireOptions {
  /** How long to wait for a held lock, in ms; 0 (default) tries once. */
  waitMs?: number;
}

/** A held lock. */
export interface Lock {
  /** The random token that owns the lock in Redis. */
  readonly token: string;
  /** Grows with every acquisition of this resource: give it to the protected store with each write. */
  readonly fencingToken: number;
  /** Aborted when the lock is lost or released. */
  readonly signal: AbortSignal;
  /** Why it was lost, once it was. */
  readonly lost: LockLostReason | undefined;
  /** Pushes the expiry out (ttlMs from now); throws RF_KIT_LOCK_LOST when it is no longer this token's. */
  extend(ttlMs?: number): Promise<void>;
  /** Releases it; false when it was no longer this token's (the work after the loss ran unprotected). */
  release(): Promise<boolean>;
}

class HeldLock implements Lock {
  readonly token: string;
  readonly fencingToken: number;
  readonly #owner: string;
  readonly #locks: LockManager;
  readonly #ctl = new AbortController();
  #lost: LockLostReason | undefined;
  #confirmedUntil: number;
  #timer: NodeJS.Timeout | undefined;
  #released = false;

  constructor(locks: LockManager, owner: string, token: string, fencingToken: number, started: number) {
    this.#locks = locks;
    this.#owner = owner;
    this.token = token;
    this.fencingToken = fencingToken;
    this.#confirmedUntil = started + locks.ttlMs;
  }

  get signal(): AbortSignal {
    return this.#ctl.signal;
  }
  get lost(): LockLostReason | undefined {
    return this.#lost;
  }

  startExtending(): void {
    const every = Math.max(1, Math.floor(this.#locks.ttlMs / 3));
    this.#timer = setInterval(() => void this.#tick(), every);
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    if (this.#lost || this.#released) return;
    const sent = Date.now();
    try {
      await this.#call(this.#locks.ttlMs, sent);
    } catch (err) {
      if (RedfenceError.is(err, 'RF_KIT_LOCK_LOST')) return; // already reported
      if (Date.now() >= this.#confirmedUntil) this.markLost('expired');
    }
  }

  async #call(ttlMs: number, sent: number): Promise<void> {
    const ok = await this.#locks.scripts.run('lockExtend', [this.#owner], [this.token, ttlMs]);
    if (ok === 1) {
      this.#confirmedUntil = sent + ttlMs;
      return;
    }
    this.markLost('taken');
    throw new RedfenceError(
      'RF_KIT_LOCK_LOST',
      `lock "${this.#locks.name}" is no longer held by this token`,
      {
        details: { fencingToken: this.fencingToken },
      },
    );
  }

  async extend(ttlMs = this.#locks.ttlMs): Promise<void> {
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 10 || ttlMs > MAX_TIMER_MS) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `lock "${this.#locks.name}": extend ttlMs must be an integer from 10, got ${ttlMs}`,
      );
    }
    if (this.#lost || this.#released) {
      throw new RedfenceError(
        'RF_KIT_LOCK_LOST',
        `lock "${this.#locks.name}" is ${this.#lost ? 'lost' : 'released'}`,
      );
    }
    await this.#call(ttlMs, Date.now());
  }

  markLost(reason: LockLostReason): void {
    if (this.#lost || this.#released) return;
    this.#lost = reason;
    clearInterval(this.#timer);
    this.#locks.lost(reason, this);
    this.#ctl.abort(new RedfenceError('RF_KIT_LOCK_LOST', `lock "${this.#locks.name}" lost (${reason})`));
  }

  async release(): Promise<boolean> {
    if (this.#released) return !this.#lost;
    this.#released = true;
    clearInterval(this.#timer);
    this.#locks.forget(this);
    const ok = (await this.#locks.scripts.run('lockRelease', [this.#owner], [this.token])) === 1;
    if (!this.#ctl.signal.aborted) this.#ctl.abort();
    return ok && !this.#lost;
  }
}

export class LockManager {
  readonly name: string;
  readonly ttlMs: number;
  /** @internal */
  readonly scripts: KitScripts;
  readonly #o: ResolvedLockOptions;
  readonly #keys: KitKeys;
  readonly #metrics: KitMetrics;
  readonly #held = new Set<HeldLock>();
  #checked: Promise<void> | undefined;

  constructor(options: LockOptions) {
    this.#o = resolveLockOptions(options);
    this.name = this.#o.name;
    this.ttlMs = this.#o.ttlMs;
    this.#keys = new KitKeys('lock', this.name, { keyEncoding: this.#o.keyEncoding });
    this.scripts = new KitScripts(import.meta.url, this.#o.redis, this.#o.policy);
    this.#metrics = new KitMetrics(this.name, this.#o.registry);
  }

  get registry(): MetricsRegistry {
    return this.#metrics.registry;
  }

  /**
   * Checks that Redis keeps the fencing counters: its maxmemory-policy must be noeviction or volatile-*
   * (src/kit/lock/eviction.ts). Runs once, before the first acquisition, or when called; rejects
   * RF_KIT_EVICTION_POLICY (kept: every later acquisition rejects the same), or the connection error
   * (tried again next time).
   */
  check(): Promise<void> {
    if (this.#checked === undefined) {
      const run = checkEvictionPolicy(
        this.#o.redis as unknown as Parameters<typeof checkEvictionPolicy>[0],
        this.name,
        this.#o.policy.timeoutMs,
      );
      this.#checked = run;
      run.catch((err: unknown) => {
        if (!RedfenceError.is(err, 'RF_KIT_EVICTION_POLICY') && this.#checked === run)
          this.#checked = undefined;
      });
    }
    return this.#checked;
  }

  /** The lock, or null when another token holds it (one attempt). */
  tryAcquire(key: KitKey): Promise<Lock | null> {
    return this.#acquire(key, 0);
  }

  /** The lock, waiting up to `waitMs` for it; throws RF_KIT_LOCK_TIMEOUT when it stays held. */
  async acquire(key: KitKey, options: AcquireOptions = {}): Promise<Lock> {
    const waitMs = options.waitMs ?? 0;
    if (!Number.isSafeInteger(waitMs) || waitMs < 0 || waitMs > MAX_TIMER_MS) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `lock "${this.name}": waitMs must be an integer >= 0, got ${String(waitMs)}`,
      );
    }
    const lock = await this.#acquire(key, waitMs);
    if (lock) return lock;
    throw new RedfenceError(
      'RF_KIT_LOCK_TIMEOUT',
      `lock "${this.name}" is held by another owner (waited ${waitMs} ms)`,
      {
        details: { key: this.#keys.describe(key) },
      },
    );
  }

  async #acquire(key: KitKey, waitMs: number): Promise<HeldLock | null> {
    const [owner, fence] = this.#keys.parts(key, 'owner', 'fence') as [string, string];
    const token = randomBytes(16).toString('base64url');
    await this.check();
    const until = Date.now() + waitMs;
    for (;;) {
      const started = Date.now();
      let reply: unknown;
      try {
        reply = await this.scripts.run('lockAcquire', [owner, fence], [token, this.ttlMs]);
      } catch (err) {
        this.#metrics.redisError('lock', 'closed');
        throw err;
      }
      if (int(reply, 0) === 1) {
        const lock = new HeldLock(this, owner, token, int(reply, 1), started);
        this.#held.add(lock);
        if (this.#o.autoExtend) lock.startExtending();
        this.#metrics.inc('lock_acquired_total', 'Locks acquired.');
        return lock;
      }
      this.#metrics.inc('lock_contended_total', 'Lock attempts that found the lock held by another owner.');
      const left = until - Date.now();
      if (left <= 0) return null;
      const pttl = int(reply, 1);
      const pause = Math.min(
        left,
        pttl > 0 ? pttl : this.#o.retryDelayMs,
        this.#o.retryDelayMs * (0.5 + Math.random()),
      );
      await new Promise((r) => setTimeout(r, Math.max(1, pause)));
    }
  }

  /** @internal */
  lost(reason: LockLostReason, lock: HeldLock): void {
    this.#held.delete(lock);
    this.#metrics.inc('lock_lost_total', 'Held locks lost before release, by reason.', { reason });
    try {
      this.#o.onLockLost?.(reason, { name: this.name, fencingToken: lock.fencingToken });
    } catch {
      // A throwing callback must not break the extension loop; the signal still aborts.
    }
  }

  /** @internal */
  forget(lock: HeldLock): void {
    this.#held.delete(lock);
  }

  /** Releases every lock still held (best effort). Idempotent. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#held].map((l) => l.release()));
  }
}
