/**
 * `redfence reconcile <module>`: reads the module's input topic (every partition, or --partitions, from
 * the earliest offset retention holds or --from), recomputes each key's expected state and fence with
 * the module's definition, compares with the store in Redis and reports each anomaly by kind
 * (src/ops/reconcile.ts, docs/operations.md "Reconciliation"). Exit 0: no anomaly; 1: anomalies found
 * (repaired or not, with --repair; or the run failed: Redis or Kafka unavailable); 2: bad options, module or topic. Every option is
 * checked and the module loaded before any connection.
 */
import { RedfenceError } from '../errors/index.js';
import { CONNECTION_OPTIONS, kafkaClient, loadProcessorModule, modulePositional } from './connection.js';
import { jsonLogger } from './log.js';
import { helpText, listOption, numberOption, parseOptions, switchOption, textOption } from './options.js';
import { connectRedis, redisClient, redisTarget } from './redis.js';

export const RECONCILE_OPTIONS = {
  ...CONNECTION_OPTIONS,
  group: textOption('<id>', {
    description: "the processor's consumer group (its committed offsets bound what state must reflect)",
    env: 'REDFENCE_GROUP',
    defaultText: 'redfence-<store>',
  }),
  partitions: listOption('<list>', {
    description: 'only these input partitions (keys of other partitions are not judged)',
    env: 'REDFENCE_RECONCILE_PARTITIONS',
    allowed: 'partition numbers n[,n...]',
    item: (s) => (/^(0|[1-9][0-9]{0,9})$/.test(s) ? Number(s) : undefined),
  }),
  from: numberOption('<offset>', {
    description:
      'start each partition at this offset (if the log holds it): keys whose value depends on earlier records are reported as cannot-judge',
    env: 'REDFENCE_RECONCILE_FROM',
    defaultText: 'the earliest offset retention holds',
    min: 0,
  }),
  sample: numberOption('<n>', {
    description: 'also print n stored keys (picked evenly) with their stored and expected fence',
    env: 'REDFENCE_RECONCILE_SAMPLE',
    default: 0,
    min: 0,
    max: 100_000,
  }),
  repair: switchOption({
    description:
      "rewrite each drifted key to the fold up to its last committed record, under its partition's current epoch, without pending entries (only if the key is unchanged since it was read); delete keys no record produced",
    env: 'REDFENCE_RECONCILE_REPAIR',
  }),
  'repair-uncommitted': switchOption({
    description:
      'with --repair, also rewind keys whose fence is at a record past the committed offset (only while the processor is stopped: its next owner applies those records again)',
    env: 'REDFENCE_RECONCILE_REPAIR_UNCOMMITTED',
  }),
  json: switchOption({
    description: 'print the report as one JSON document',
    env: 'REDFENCE_RECONCILE_JSON',
  }),
  'read-timeout': numberOption('<ms>', {
    description: 'fail when reading the log makes no progress for this long',
    env: 'REDFENCE_RECONCILE_READ_TIMEOUT_MS',
    default: 30_000,
    min: 100,
    max: 3_600_000,
  }),
};

export const RECONCILE_HELP = helpText(
  'redfence reconcile <module> [options]',
  "Compares the store of the processor exported by <module> with its input log: each key's value, fence\n(partition, offset, epoch) and pending entries against the processor's own fold of the log.\nExit 0: no anomaly; 1: anomalies found (one line each: kind, Redis key, detail); 2: bad input.",
  RECONCILE_OPTIONS,
);

export async function reconcileCommand(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: o, sources, positionals, help } = parseOptions(RECONCILE_OPTIONS, args);
  if (help) {
    out(RECONCILE_HELP);
    return 0;
  }
  if (o['repair-uncommitted'] && !o.repair)
    throw new RedfenceError('RF_INVALID_OPTIONS', '--repair-uncommitted applies to --repair; add --repair');
  const file = modulePositional('reconcile', positionals);
  const partitions =
    o.partitions === undefined ? undefined : [...new Set(o.partitions)].sort((a, b) => a - b);
  const target = redisTarget(o, sources);
  const client = kafkaClient(o, 'redfence-reconcile');
  const definition = await loadProcessorModule(
    file,
    'reconcile compares the state of a processor (defineProcessor) with its input',
  );
  const group = o.group ?? `redfence-${definition.store}`;

  const { KeySpace } = await import('../keys/index.js');
  const { ExpectedFold } = await import('../ops/reconcile-fold.js');
  const { readEpochs, readLog, readStore } = await import('../ops/reconcile-sources.js');
  const { reconcile } = await import('../ops/reconcile.js');
  const report = await import('../ops/reconcile-report.js');
  const keys = new KeySpace({ store: definition.store });
  const redis = await redisClient(target, jsonLogger('error', 'reconcile'));
  try {
    await connectRedis(redis, target, o['connect-timeout']);
    const shown = report.progress();
    let fold: InstanceType<typeof ExpectedFold> | undefined;
    let stored: Awaited<ReturnType<typeof readStore>> = [];
    const ranges = await readLog({
      client,
      topic: definition.input,
      group,
      ...(partitions === undefined ? {} : { partitions }),
      ...(o.from === undefined ? {} : { from: o.from }),
      timeoutMs: o['read-timeout'],
      between: async (partitionCount) => {
        stored = await readStore(redis, keys);
        fold = new ExpectedFold(definition as never, keys, partitionCount);
      },
      onRecord: (r) => (fold as InstanceType<typeof ExpectedFold>).add(r),
      onProgress: (p, at, range) => shown.update(p, at, range),
    });
    shown.done();
    const f = fold as unknown as InstanceType<typeof ExpectedFold>;
    const epochs = await readEpochs(redis, keys, definition.input, ranges.keys());
    const result = await reconcile(f, ranges, stored, epochs);
    let repair: import('../ops/reconcile-repair.js').RepairResult | undefined;
    if (o.repair && result.anomalies.length > 0) {
      const { applyRepairs, planRepairs } = await import('../ops/reconcile-repair.js');
      const { plans, skipped } = planRepairs(f, ranges, stored, epochs, result, {
        uncommitted: o['repair-uncommitted'],
      });
      repair = { ...(await applyRepairs(redis as never, plans)), skipped };
    }
    const input = {
      topic: definition.input,
      store: definition.store,
      group,
      ranges,
      records: f.records,
      dead: f.dead,
      storedKeys: stored.length,
      result,
      samples: report.sample(result.verdicts, o.sample),
      ...(repair === undefined ? {} : { repair }),
    };
    out(o.json ? report.reportJson(input) : report.reportText(input));
    return result.anomalies.length > 0 ? 1 : 0;
  } finally {
    redis.disconnect();
  }
}
