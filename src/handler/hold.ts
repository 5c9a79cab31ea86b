/**
 * Rate-limited records: a `handle` that throws RF_KIT_RATE_LIMITED (what `RateLimiter.take()` throws,
 * or `new RateLimited(retryAfterMs)` for any other limit, e.g. a partner's 429 with Retry-After) is not
 * a failure. Its record is held in its key's lane and its partition is paused in the consumer (the poll
 * loop goes on for every other partition) until `retryAfterMs` has passed; then the same record is
 * tried again, and the try does not count as an attempt. A revocation or close ends the hold at once
 * (the record is abandoned, not committed). Several holds on one partition keep it paused until the
 * last ends; the scheduler's own bounds still apply after that.
 */
import { RedfenceError } from '../errors/index.js';
import { delay } from '../runtime/backoff.js';
import type { PartitionWork } from './scheduler.js';

/** Longest hold of one try (a Node timer's limit). */
const MAX_HOLD_MS = 2_147_483_647;

/** A limit refused the call: hold the record's partition for `retryAfterMs`, then try it again. */
export class RateLimited extends RedfenceError {
  constructor(retryAfterMs: number, message = `rate limited: retry in ${retryAfterMs} ms`) {
    super('RF_KIT_RATE_LIMITED', message, { details: { retryAfterMs } });
  }
}

/** How long to hold for a rate-limit refusal on `err`'s cause chain, or undefined when it is none. */
export function rateLimitedFor(err: unknown): number | undefined {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 16; depth++) {
    if (RedfenceError.is(e, 'RF_KIT_RATE_LIMITED')) {
      const ms = Number(e.details?.retryAfterMs);
      return Number.isFinite(ms) ? Math.min(MAX_HOLD_MS, Math.max(1, Math.ceil(ms))) : 1000;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** What a hold needs of the scheduler. */
export interface HoldScheduler {
  /** Pauses the partition in the consumer (kept paused while `heldUntil` is ahead). */
  pauseHeld(part: PartitionWork): void;
  /** Resumes it when nothing holds it and its bounds allow. */
  wake(part: PartitionWork): void;
}

/** Holds one record: pauses its partition for `ms` (or until it stops), then wakes it. */
export async function holdRecord(scheduler: HoldScheduler, part: PartitionWork, ms: number): Promise<void> {
  const until = Date.now() + ms;
  if (until > part.heldUntil) part.heldUntil = until;
  scheduler.pauseHeld(part);
  await delay(ms, part.stop.signal);
  // a timer may fire a little before Date.now() reaches `until`: this hold is over either way
  if (part.heldUntil <= until) part.heldUntil = 0;
  scheduler.wake(part);
}
