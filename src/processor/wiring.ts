/**
 * Pieces the Processor class wires together, built here so its constructor only connects them: the
 * Kafka port of the options, the Redis step (through the outage guard, refreshing a Cluster's slots
 * after a redirect), the WAIT confirmation of a batch's writes, the watchdog and the snapshotter.
 */
import type { Fence } from '../fence/index.js';
import { ConfluentKafka } from '../kafka/confluent.js';
import type { KafkaPort } from '../kafka/types.js';
import { adapterSettings } from '../runtime/kafka-options.js';
import type { Logger } from '../runtime/logger.js';
import type { Replication } from './batch.js';
import type { ResolvedOptions } from './options.js';
import type { OwnedPartition } from './partition-table.js';
import type { RedisGuard } from './redis-guard.js';
import { connectionCloses, refreshAfterRedirect, waitReplicas } from './redis-setup.js';
import { snapshotClient } from './snapshot-options.js';
import { Snapshotter } from './snapshotter.js';
import { Watchdog, type WatchdogContext } from './watchdog.js';

/** The port given in the options, or the default adapter (transactional in exactly-once mode). */
export function kafkaPort(o: ResolvedOptions, groupId: string, instanceId: string): KafkaPort {
  if ('port' in o.kafka) return o.kafka.port;
  return new ConfluentKafka({
    ...adapterSettings(o.kafka.settings, {
      clientId: `redfence-${instanceId}`,
      ...(o.mode === 'exactly-once' ? { transactionalId: `${groupId}-${instanceId}` } : {}),
    }),
    groupId,
  });
}

export type RedisStep = <R>(what: string, fn: () => Promise<R>) => Promise<R>;

/** A Redis call through the outage guard; a Cluster redirect refreshes the slot map before the retry. */
export function redisStepOf(guard: RedisGuard, redis: ResolvedOptions['redis']): RedisStep {
  return (what, fn) =>
    guard.step(what, async () => {
      try {
        return await fn();
      } catch (err) {
        refreshAfterRedirect(redis, err);
        throw err;
      }
    });
}

/**
 * With `waitReplicas`, a batch's writes are confirmed by WAIT, and made again when a Redis connection
 * closed since them (its writes may be lost with it); without, every write is confirmed at once.
 */
export function replicationOf(o: ResolvedOptions, redisStep: RedisStep, log: Logger): Replication {
  const wait = o.waitReplicas;
  const closes = wait ? connectionCloses(o.redis) : () => 0;
  return {
    mark: closes,
    confirm: async (mark) => {
      if (!wait) return true;
      await redisStep('WAIT', () => waitReplicas(o.redis, wait));
      if (closes() === mark) return true;
      log.warn({}, 'WAIT: a Redis connection closed since the writes it was to confirm: making them again');
      return false;
    },
  };
}

export function watchdogOf(o: ResolvedOptions, ctx: WatchdogContext): Watchdog | undefined {
  return o.watchdog && new Watchdog(ctx, o.watchdog);
}

/** The snapshotter of the `snapshot` option (needs connection settings, not a port). */
export function snapshotterOf(
  o: ResolvedOptions,
  fence: Fence,
  instanceId: string,
  partitions: () => readonly OwnedPartition[],
  outage: () => boolean,
  log: Logger,
): Snapshotter | undefined {
  if (!o.snapshot || !('settings' in o.kafka)) return undefined;
  return new Snapshotter({
    options: o.snapshot,
    redis: o.redis,
    keys: fence.keys,
    input: o.definition.input,
    client: snapshotClient(o.kafka.settings, `redfence-${instanceId}`),
    replicationFactor: o.replicationFactor,
    partitions,
    outage,
    log,
  });
}
