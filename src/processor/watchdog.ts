/**
 * The stalled-consumer watchdog's decision, kept pure so it can be tested without a broker. The
 * promise-API consumer has a known failure where it silently stops delivering batches; the processor
 * asks this every interval and, on 'recover', seeks its partitions back to their committed offsets
 * (a fresh fetch), and after repeated failed recoveries stops reporting liveness so /livez fails and
 * the orchestrator restarts the instance.
 */
export interface WatchdogInput {
  now: number;
  /** When the last batch was delivered (or the partitions were assigned). */
  lastDeliveryAt: number;
  stallMs: number;
  batchInFlight: boolean;
  redisOutage: boolean;
  /** Records between the committed offsets and the high watermarks of the owned partitions. */
  lag: number;
  /** Recoveries tried since the last delivery. */
  recoveries: number;
  maxRecoveries: number;
}

export type WatchdogVerdict = 'ok' | 'recover' | 'give-up';

export function watchdogVerdict(i: WatchdogInput): WatchdogVerdict {
  if (i.batchInFlight || i.redisOutage || i.lag <= 0) return 'ok';
  if (i.now - i.lastDeliveryAt < i.stallMs) return 'ok';
  return i.recoveries >= i.maxRecoveries ? 'give-up' : 'recover';
}
