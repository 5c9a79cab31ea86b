/**
 * `redfence rebuild <module>`: restores the store of the processor exported by <module> into a Redis
 * that lost it, from the processor's snapshot topic, and replays the input from each partition's
 * snapshot up to the group's committed offset through the fence (src/ops/rebuild.ts,
 * docs/operations.md "Snapshot and rebuild"). Exit 0: rebuilt; 1: the rebuild failed (Redis or Kafka
 * unavailable, no complete snapshot, the log no longer holds the replay start); 2: bad options, module
 * or topic, a store that is not empty or a group with live members (without --force). Every option is
 * checked and the module loaded before any connection. A module exporting a built topology is rebuilt
 * from its own snapshot (rebuild-topology.ts).
 */
import { RedfenceError } from '../errors/index.js';
import { isBuiltTopology, loadRunnable } from '../loader/load.js';
import { CONNECTION_OPTIONS, kafkaClient, loadProcessorModule, modulePositional } from './connection.js';
import { jsonLogger } from './log.js';
import { choiceOption, helpText, numberOption, parseOptions, switchOption, textOption } from './options.js';
import { connectRedis, redisClient, redisTarget } from './redis.js';

export const REBUILD_OPTIONS = {
  ...CONNECTION_OPTIONS,
  group: textOption('<id>', {
    description: "the processor's consumer group (the replay ends at its committed offsets)",
    env: 'REDFENCE_GROUP',
    defaultText: 'redfence-<store>; a topology: its applicationId',
  }),
  'snapshot-topic': textOption('<topic>', {
    description: "the processor's snapshot topic (its snapshot.topic option)",
    env: 'REDFENCE_SNAPSHOT_TOPIC',
    defaultText: '<store>-snapshot; a topology: <applicationId>-snapshot',
    allowed: 'a Kafka topic name',
    pattern: /^[A-Za-z0-9._-]{1,249}$/,
  }),
  fencing: choiceOption(['strict', 'cluster'] as const, {
    description: "the processor's fencing mode (how the replay writes); processors only",
    env: 'REDFENCE_FENCING',
    defaultText: 'cluster with --cluster, else strict',
  }),
  'epoch-margin': numberOption('<n>', {
    description:
      "each partition's epoch becomes the highest one seen plus this (fences an instance that acquired an epoch after the last snapshot)",
    env: 'REDFENCE_REBUILD_EPOCH_MARGIN',
    default: 1000,
    min: 1,
    max: 1_000_000_000,
  }),
  force: switchOption({
    description:
      "delete the store's keys first when it is not empty; go on when the group has live members or a partition has no complete snapshot (replayed from the earliest offset)",
    env: 'REDFENCE_REBUILD_FORCE',
  }),
  'dry-run': switchOption({
    description:
      'read the snapshot and the offsets, print the plan (keys, replay ranges, epochs) and write nothing',
    env: 'REDFENCE_REBUILD_DRY_RUN',
  }),
  json: switchOption({ description: 'print the report as one JSON document', env: 'REDFENCE_REBUILD_JSON' }),
  'read-timeout': numberOption('<ms>', {
    description: 'fail when reading a topic makes no progress for this long',
    env: 'REDFENCE_REBUILD_READ_TIMEOUT_MS',
    default: 30_000,
    min: 100,
    max: 3_600_000,
  }),
};

export const REBUILD_HELP = helpText(
  'redfence rebuild <module> [options]',
  "Restores the store of the processor (or the state of the topology) exported by <module> from its snapshot\ntopic into an empty Redis, then replays each input partition (a topology: each partition its aggregations\nread) from its snapshot to the group's committed offset through the fence.\nStop every instance first. Exit 0: rebuilt; 1: failed; 2: bad input (or a store that is not empty).",
  REBUILD_OPTIONS,
);

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

export async function rebuildCommand(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: o, sources, positionals, help } = parseOptions(REBUILD_OPTIONS, args);
  if (help) {
    out(REBUILD_HELP);
    return 0;
  }
  const file = modulePositional('rebuild', positionals);
  const target = redisTarget(o, sources);
  if (o.fencing === 'strict' && target.kind === 'cluster')
    throw invalid("--fencing strict needs a single Redis: with --cluster use 'cluster'");
  const client = kafkaClient(o, 'redfence-rebuild');
  const loaded = await loadRunnable(file);
  if (isBuiltTopology(loaded)) {
    if (o.fencing !== undefined)
      throw invalid('--fencing applies to processors: a topology replays with its own key calls');
    const { rebuildTopologyCommand } = await import('./rebuild-topology.js');
    return rebuildTopologyCommand({ o, built: loaded, target, client, out });
  }
  const definition = await loadProcessorModule(
    file,
    'rebuild restores the state of a processor (defineProcessor)',
  );
  const group = o.group ?? `redfence-${definition.store}`;
  const { snapshotTopic } = await import('../processor/snapshot-options.js');
  const topic = o['snapshot-topic'] ?? snapshotTopic(definition.store);

  const { KeySpace } = await import('../keys/index.js');
  const { rebuild } = await import('../ops/rebuild.js');
  const { progress } = await import('../ops/reconcile-report.js');
  const keys = new KeySpace({ store: definition.store });
  const redis = await redisClient(target, jsonLogger('error', 'rebuild'));
  try {
    await connectRedis(redis, target, o['connect-timeout']);
    const shown = progress();
    const warnings: string[] = [];
    const report = await rebuild({
      definition: definition as never,
      redis,
      keys,
      fencing: o.fencing ?? (target.kind === 'cluster' ? 'cluster' : 'strict'),
      client,
      group,
      snapshotTopic: topic,
      force: o.force,
      dryRun: o['dry-run'],
      epochMargin: o['epoch-margin'],
      timeoutMs: o['read-timeout'],
      onProgress: (_what, p, at, range) => shown.update(p, at, range),
      warn: (m) => warnings.push(m),
    });
    shown.done();
    if (o.json) out(`${JSON.stringify({ store: definition.store, topic, group, ...report, warnings })}\n`);
    else {
      const lines = [
        `${report.dryRun ? 'would rebuild' : 'rebuilt'} store ${definition.store} from ${topic}: ${report.keys} keys (${report.pending} pending entries) from ${report.snapshotRecords} snapshot records${report.cleared > 0 ? `, ${report.cleared} keys ${report.dryRun ? 'in the store now' : 'deleted first'}` : ''}`,
        'partition  marker  keys  replayed from..to  records  epoch',
        ...report.partitions.map(
          (p) =>
            `${String(p.partition).padStart(9)}  ${String(p.marker ?? '-').padStart(6)}  ${String(p.keys).padStart(4)}  ${`${p.from}..${p.to}`.padStart(17)}  ${String(p.replayed).padStart(7)}  ${p.epoch}`,
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
