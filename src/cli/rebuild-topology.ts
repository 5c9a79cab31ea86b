/**
 * `redfence rebuild <module>` when the module's default export is a built topology: restores the
 * application's state from its snapshot topic (default `<applicationId>-snapshot`) and replays each
 * stateful sub-topology's partitions to the group's (default: the applicationId) committed offsets
 * (src/ops/rebuild-topology.ts; docs/operations.md, "Snapshots of a topology"). What cannot be rebuilt
 * exactly (a pattern source, session or sliding windows) is refused before any connection.
 */
import type { ClientSettings } from '../kafka/client-config.js';
import type { BuiltTopology } from '../topology/types.js';
import { jsonLogger } from './log.js';
import { connectRedis, type RedisTarget, redisClient } from './redis.js';

/** The flags of `redfence rebuild` (rebuild.ts's table) a topology's rebuild reads. */
export interface TopologyRebuildFlags {
  readonly group: string | undefined;
  readonly 'snapshot-topic': string | undefined;
  readonly force: boolean;
  readonly 'dry-run': boolean;
  readonly json: boolean;
  readonly 'epoch-margin': number;
  readonly 'read-timeout': number;
  readonly 'connect-timeout': number;
}

export interface TopologyRebuildRun {
  readonly o: TopologyRebuildFlags;
  readonly built: BuiltTopology;
  readonly target: RedisTarget;
  readonly client: Omit<ClientSettings, 'groupId'>;
  readonly out: (s: string) => void;
}

export async function rebuildTopologyCommand(r: TopologyRebuildRun): Promise<number> {
  const { o, built, target, client, out } = r;
  const { checkRebuildable, rebuildTopology } = await import('../ops/rebuild-topology.js');
  checkRebuildable(built);
  const app = built.applicationId;
  const group = o.group ?? app;
  const { snapshotTopic } = await import('../processor/snapshot-options.js');
  const topic = o['snapshot-topic'] ?? snapshotTopic(app);
  const redis = await redisClient(target, jsonLogger('error', 'rebuild'));
  try {
    await connectRedis(redis, target, o['connect-timeout']);
    const warnings: string[] = [];
    const report = await rebuildTopology({
      topology: built,
      redis,
      client,
      group,
      snapshotTopic: topic,
      force: o.force,
      dryRun: o['dry-run'],
      epochMargin: o['epoch-margin'],
      timeoutMs: o['read-timeout'],
      warn: (m) => warnings.push(m),
    });
    if (o.json) out(`${JSON.stringify({ applicationId: app, topic, group, ...report, warnings })}\n`);
    else {
      const lines = [
        `${report.dryRun ? 'would rebuild' : 'rebuilt'} application ${app} from ${topic}: ${report.keys} fence keys (${report.pending} pending entries) from ${report.snapshotRecords} snapshot records${report.cleared > 0 ? `, ${report.cleared} keys ${report.dryRun ? 'in Redis now' : 'deleted first'}` : ''}`,
        'topic/partition  marker  keys  replayed from..to  records  epoch',
        ...report.partitions.map(
          (p) =>
            `${`${p.topic}/${p.partition}`.padStart(15)}  ${String(p.marker ?? '-').padStart(6)}  ${String(p.keys).padStart(4)}  ${`${p.from}..${p.to}`.padStart(17)}  ${String(p.replayed).padStart(7)}  ${p.epoch}`,
        ),
        ...warnings.map((w) => `warning: ${w}`),
      ];
      out(`${lines.join('\n')}\n`);
    }
    return 0;
  } finally {
    redis.disconnect();
  }
}
