/**
 * Crash points for fault tests: `REDFENCE_CRASH_AT=<point>` makes the process SIGKILL itself the
 * `REDFENCE_CRASH_AFTER`-th time (default 1) it reaches that point. Off unless the variable is set;
 * read once at load. Never set in production.
 */
export const CRASH_POINTS = [
  'after-redis-write', // fence calls answered, nothing produced yet
  'after-produce', // at-least-once: records handed to the producer, delivery not awaited
  'after-delivery', // at-least-once: delivered, offsets not committed
  'in-transaction', // exactly-once: outputs and offsets in the open transaction, not committed
  'after-commit', // offsets (or the transaction) committed
] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

const target = process.env.REDFENCE_CRASH_AT as CrashPoint | undefined;
let remaining = Number(process.env.REDFENCE_CRASH_AFTER ?? 1);

export function crashPoint(point: CrashPoint): void {
  if (target !== point) return;
  remaining--;
  if (remaining <= 0) process.kill(process.pid, 'SIGKILL');
}
