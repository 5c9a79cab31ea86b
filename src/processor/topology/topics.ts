/**
 * A topology's repartition topics at start-up, as Kafka Streams makes its internal topics: each one
 * `<applicationId>-<name>-repartition`, with `repartition()`'s numberOfPartitions or else the partition
 * count of the topic its writing sub-topology reads (Kafka Streams: the largest of its source topics'),
 * `cleanup.policy=delete` and
 * `retention.ms=-1` (records carry their own, possibly old, timestamps; what every reader has committed
 * is deleted instead: purge.ts). Created when `createTopics` is set, checked otherwise
 * (RF_TOPIC_MISSING naming the topic and the fix). An existing topic with another count than a
 * numberOfPartitions is refused (RF_TOPIC_PARTITIONS), as Kafka Streams refuses it; one with another
 * count than the reader's is used, with a warning.
 */
import { RedfenceError } from '../../errors/index.js';
import { onGroup, onTopic, type Permission } from '../../kafka/permissions.js';
import { ensureTopics, readBack } from '../../kafka/topics.js';
import type { KafkaPort } from '../../kafka/types.js';
import type { Logger } from '../../runtime/logger.js';
import { fixedPartitionCounts } from '../../topology/build.js';
import type { RunPlan } from '../../topology/run/plan.js';
import type { BuiltTopology } from '../../topology/types.js';

export const REPARTITION_CONFIG: Readonly<Record<string, string>> = Object.freeze({
  'cleanup.policy': 'delete',
  'retention.ms': '-1',
});

export interface RepartitionTopicsOptions {
  readonly create: boolean;
  readonly replicationFactor?: number;
}

function fix(topic: string, partitions: number, from: string | null): string {
  const why =
    from === null
      ? "repartition()'s numberOfPartitions"
      : `as ${from}, which the sub-topology writing it reads (the largest count)`;
  return (
    `repartition topic ${topic} does not exist: create it with ${partitions} partition${partitions === 1 ? '' : 's'} ` +
    `(${why}) and retention.ms -1, e.g. kafka-topics.sh --create ` +
    `--topic ${topic} --partitions ${partitions} --config retention.ms=-1, or run with createTopics: true ` +
    '(redfence run --create-topics)'
  );
}

/**
 * Checks (with `create`: creates) the plan's repartition topics, each after the topic its writer reads.
 * Returns the topics created.
 *
 * @example
 * await ensureRepartitionTopics(port, plan, { create: true }, log); // ['fraud-by-region-repartition']
 */
export async function ensureRepartitionTopics(
  port: KafkaPort,
  plan: RunPlan,
  o: RepartitionTopicsOptions,
  log: Logger,
): Promise<string[]> {
  const created: string[] = [];
  const fixed = fixedPartitionCounts(plan.built);
  const done = new Set<number>();
  for (const sub of plan.subs.values()) {
    if (sub.writes.length === 0 || done.has(sub.id)) continue;
    done.add(sub.id);
    const found = await port.describeTopics([...sub.topics, ...sub.writes]);
    // Kafka Streams: the largest partition count of the topics the writing sub-topology reads
    let partitions = 0;
    for (const t of sub.topics) {
      const n = found.get(t);
      if (n === undefined)
        throw new RedfenceError('RF_TOPIC_MISSING', `topic ${t} does not exist`, { details: { topic: t } });
      partitions = Math.max(partitions, n);
    }
    const from = sub.topics.join(', ');
    for (const topic of sub.writes) {
      const want = fixed.get(topic);
      const n = found.get(topic);
      if (n !== undefined) {
        if (want !== undefined && n !== want) throw mismatch(topic, want, n);
        if (want === undefined && n !== partitions)
          log.warn(
            { topic, partitions: n, expected: partitions },
            'repartition topic has another partition count than the topic its writer reads',
          );
        continue;
      }
      if (!o.create)
        throw new RedfenceError(
          'RF_TOPIC_MISSING',
          fix(topic, want ?? partitions, want === undefined ? from : null),
          {
            details: { topics: [topic] },
          },
        );
      await create(port, topic, want ?? partitions, o.replicationFactor);
      created.push(topic);
    }
  }
  return created;
}

/** Kafka Streams' refusal of an internal topic with another partition count than the topology asks for. */
function mismatch(topic: string, want: number, has: number): RedfenceError {
  return new RedfenceError(
    'RF_TOPIC_PARTITIONS',
    `repartition topic ${topic} has ${has} partition${has === 1 ? '' : 's'}, but repartition() asks for ${want} (numberOfPartitions): ` +
      'delete the topic (after the records in it are processed) or set numberOfPartitions to its count',
    { details: { topic, partitions: has, expected: want } },
  );
}

async function create(port: KafkaPort, topic: string, partitions: number, rf: number | undefined) {
  try {
    await port.createTopics([
      {
        topic,
        partitions,
        config: REPARTITION_CONFIG,
        ...(rf === undefined ? {} : { replicationFactor: rf }),
      },
    ]);
  } catch (err) {
    if (RedfenceError.is(err, 'RF_KAFKA_AUTH')) throw err;
    throw new RedfenceError(
      'RF_TOPIC_MISSING',
      `could not create repartition topic ${topic}: ${(err as Error)?.message ?? String(err)}`,
      { cause: err, details: { topics: [topic] } },
    );
  }
  await readBack(port, [topic]);
}

/** What {@link prepareTopics} needs beside the port and the plan. */
export interface PrepareTopicsOptions {
  readonly topology: BuiltTopology;
  readonly deadLetterTopic: string;
  readonly create: boolean;
  /** > 0: the replication factor of topics made; else the broker's default. */
  readonly replicationFactor: number;
  readonly log: Logger;
}

/**
 * Start-up's topics: every input exists (RF_TOPIC_MISSING naming those that do not: redfence never
 * creates what it reads), the outputs and the dead-letter topic exist or are made like the first
 * input, and the repartition topics (above). Returns the first input's partition count.
 */
export async function prepareTopics(
  kafka: KafkaPort,
  plan: RunPlan,
  o: PrepareTopicsOptions,
): Promise<number> {
  const internal = new Set(o.topology.repartitionTopics);
  const sinks = o.topology.subTopologies.flatMap((s) => s.sinkTopics).filter((t) => !internal.has(t));
  const rf = o.replicationFactor > 0 ? { replicationFactor: o.replicationFactor } : {};
  const inputs = await kafka.describeTopics(plan.inputs);
  const missing = plan.inputs.filter((t) => !inputs.has(t));
  if (missing.length > 0)
    throw new RedfenceError(
      'RF_TOPIC_MISSING',
      `input topic${missing.length === 1 ? '' : 's'} ${missing.join(', ')} ${missing.length === 1 ? 'does' : 'do'} not exist: create ${missing.length === 1 ? 'it' : 'them'} (redfence never creates the topics it reads)`,
      { details: { topics: missing } },
    );
  const found = await ensureTopics(kafka, {
    input: plan.topic,
    outputs: [...new Set([...sinks, o.deadLetterTopic])],
    create: o.create,
    ...rf,
  });
  if (found.created.length > 0)
    o.log.info({ topics: found.created }, 'created missing topics with the input partition count');
  const repartition = await ensureRepartitionTopics(kafka, plan, { create: o.create, ...rf }, o.log);
  if (repartition.length > 0) o.log.info({ topics: repartition }, 'created repartition topics');
  return found.inputPartitions;
}

/**
 * The Kafka permissions a topology needs (docs/operations.md, "Kafka ACLs"): Read on its inputs and the group, Write on
 * its outputs and the dead-letter topic, Read and Write on its repartition topics, and Delete on them
 * when it purges them (DeleteRecords; a port without deleteRecords never does).
 */
export function topologyPermissions(
  built: BuiltTopology,
  plan: RunPlan,
  deadLetterTopic: string,
  groupId: string,
  purges: boolean,
): Permission[] {
  const internal = new Set(built.repartitionTopics);
  const sinks = built.subTopologies.flatMap((s) => s.sinkTopics).filter((t) => !internal.has(t));
  return [
    ...plan.inputs.map((t) => onTopic('Read', t, 'an input it consumes')),
    onGroup(groupId),
    ...[...new Set(sinks)].map((t) => onTopic('Write', t, 'an output it produces to')),
    onTopic('Write', deadLetterTopic, 'the dead-letter topic'),
    ...[...internal].flatMap((t) => [
      onTopic('Write', t, 'a repartition topic it writes'),
      onTopic('Read', t, 'a repartition topic it consumes'),
      ...(purges ? [onTopic('Delete', t, 'a repartition topic it purges (DeleteRecords)')] : []),
    ]),
  ];
}
