/**
 * After a topology chaos run has drained: every input topic read back (partitions, offsets, timestamps,
 * keys, values and headers as written; with the run's isolation, as the instances read it: its ticks
 * with `--idle-close`), every output topic (read_committed in exactly-once mode, read_uncommitted
 * in at-least-once mode) and the dead-letter topic, the group's committed offsets; judged against the
 * reference model (src/chaos/topology-verdict.ts). Reads Kafka with the verifier's reader, not the runtime's.
 */
import type { ModelInput } from '../topology/model.js';
import type { BuiltTopology } from '../topology/types.js';
import { ChaosKafka, type ConnectionConfig, type ReadMessage, readTopic } from './kafka.js';
import type { RepartitionLog } from './repartition-log.js';
import { asModelRecord } from './topology-stages.js';
import { judgeTopologyRun, type RepartitionRead, type TopologyResult } from './topology-verdict.js';

export interface JudgeTopologyOptions {
  brokers: string[];
  kafkaConfig?: ConnectionConfig;
  mode: 'exactly-once' | 'at-least-once';
  /** The topology on the run's topics (src/chaos/topology-module.ts onChaosTopics). */
  built: BuiltTopology;
  /** The run's input topics (a topology listing several, or a pattern's: src/chaos/topology-topics.ts). */
  inputs: readonly string[];
  outputs: readonly string[];
  deadLetter: string;
  group: string;
  produced: number;
  /** The harness's reader of the repartition topics (a topology with any), read to their ends already. */
  repartition?: RepartitionLog | undefined;
}

const TIMEOUT = 300_000;

export async function judgeTopology(o: JudgeTopologyOptions): Promise<TopologyResult> {
  // as the instances read it: exactly-once, a tick in a transaction that aborted is not there
  const isolation = o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted';
  const input: ModelInput[] = [];
  for (const topic of o.inputs)
    await readTopic(
      o.brokers,
      topic,
      isolation,
      (m) => input.push(asModelRecord(topic, m)),
      TIMEOUT,
      o.kafkaConfig,
    );
  const outputs = new Map<string, ReadMessage[]>();
  for (const topic of o.outputs) {
    const list: ReadMessage[] = [];
    outputs.set(topic, list);
    await readTopic(o.brokers, topic, isolation, (m) => list.push(m), TIMEOUT, o.kafkaConfig);
  }
  const deadLetters: ReadMessage[] = [];
  await readTopic(o.brokers, o.deadLetter, isolation, (m) => deadLetters.push(m), TIMEOUT, o.kafkaConfig);
  const kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  const offsets = new Map<string, { committed: Map<number, number>; ends: Map<number, number> }>();
  try {
    // one after the other: the first call connects the admin client
    for (const topic of o.inputs) {
      const committed = await kafka.committedOffsets(o.group, topic);
      offsets.set(topic, { committed, ends: await kafka.endOffsets(topic) });
    }
  } catch (err) {
    await kafka.close();
    throw err;
  }
  const repartition = await readRepartition(kafka, o).finally(() => kafka.close());
  return judgeTopologyRun({
    ...(repartition ? { repartition } : {}),
    mode: o.mode,
    built: o.built,
    produced: o.produced,
    input,
    outputs,
    deadLetters,
    offsets,
  });
}

/** What the reader holds of each repartition topic, the group's commits on them and what the purge deleted. */
async function readRepartition(
  kafka: ChaosKafka,
  o: JudgeTopologyOptions,
): Promise<RepartitionRead | undefined> {
  const log = o.repartition;
  if (!log || o.built.repartitionTopics.length === 0) return undefined;
  const counts = new Map(o.built.repartitionTopics.map((t) => [t, log.partitions(t)]));
  const records = new Map<string, ReadMessage[]>();
  const committed = new Map<string, Map<number, number>>();
  let purged = 0;
  for (const topic of counts.keys()) {
    records.set(topic, log.records(topic));
    committed.set(topic, await kafka.committedOffsets(o.group, topic));
    for (const low of (await kafka.startOffsets(topic)).values()) purged += low;
  }
  return { counts, records, committed, purged, failures: log.failures };
}
