/**
 * Crash points for fault tests: a hook the processor calls at each point of its cycle, given only
 * through the internal processor option `crashHook` (never read from the environment here). The
 * `redfence run` command builds one from `REDFENCE_CRASH_AT=<point>` and `REDFENCE_CRASH_AFTER=<n>`
 * ({@link crashHookFromEnv}): the process SIGKILLs itself the n-th time (default 1) it reaches that
 * point. The chaos harness and the crash tests set those variables on the instances they start. Never
 * set in production.
 */
import { RedfenceError } from '../errors/index.js';

export const CRASH_POINTS = [
  'after-redis-write', // fence calls answered, nothing produced yet
  'after-produce', // at-least-once: records handed to the producer, delivery not awaited
  'after-delivery', // at-least-once: delivered, offsets not committed
  'in-transaction', // exactly-once: outputs and offsets in the open transaction, not committed
  'after-commit', // offsets (or the transaction) committed
] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

/** Called at each crash point of the processor's cycle. */
export type CrashHook = (point: CrashPoint) => void;

/** The processor's default: no crash point does anything. */
export const NO_CRASH: CrashHook = () => undefined;

/**
 * A hook that SIGKILLs this process the `REDFENCE_CRASH_AFTER`-th time it reaches `REDFENCE_CRASH_AT`;
 * undefined when `REDFENCE_CRASH_AT` is unset or empty. An unknown point or a count that is not a
 * positive integer is RF_INVALID_OPTIONS (a test that sets a wrong name must not pass by never crashing).
 */
export function crashHookFromEnv(env: NodeJS.ProcessEnv = process.env): CrashHook | undefined {
  const at = env.REDFENCE_CRASH_AT;
  if (at === undefined || at === '') return undefined;
  if (!(CRASH_POINTS as readonly string[]).includes(at))
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `REDFENCE_CRASH_AT must be one of ${CRASH_POINTS.join(', ')}, got ${JSON.stringify(at)}`,
    );
  const after =
    env.REDFENCE_CRASH_AFTER === undefined || env.REDFENCE_CRASH_AFTER === ''
      ? 1
      : Number(env.REDFENCE_CRASH_AFTER);
  if (!Number.isSafeInteger(after) || after < 1)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `REDFENCE_CRASH_AFTER must be a positive integer, got ${JSON.stringify(env.REDFENCE_CRASH_AFTER)}`,
    );
  let remaining = after;
  return (point) => {
    if (point !== at) return;
    remaining--;
    if (remaining <= 0) process.kill(process.pid, 'SIGKILL');
  };
}
