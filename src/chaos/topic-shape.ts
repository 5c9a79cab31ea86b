/**
 * The shape of a topology run's input topics beyond `--partitions`, checked before any connection
 * (RF_INVALID_OPTIONS naming the option):
 *
 * - `--input-partitions <topic>=<n>,...`: an input topic with its own partition count (the module's
 *   name: a listed input, or a name its records give a pattern). A sub-topology reading several topics
 *   keeps no state (the runtime refuses an aggregation there, as planTopology says), so its topics need
 *   not be co-partitioned: each partition of each topic is a task of its own, and a repartition topic
 *   its writer makes gets the largest count of the topics it reads, as Kafka Streams makes it.
 * - `--late-topic <topic>`: a topic a pattern reads, made by the harness while the run lasts, when its
 *   first record is due (src/chaos/late-topic.ts). The runtime resolves a pattern when an instance starts
 *   (src/processor/topology/sources.ts), so each pattern reading it must match another topic the records
 *   name (or the instances could not start), and a listed input cannot be late (redfence run refuses a
 *   missing one).
 */
import { RedfenceError } from '../errors/index.js';
import { patternText } from '../topology/patterns.js';
import type { BuiltTopology } from '../topology/types.js';
import { topicsOf } from './topology-topics.js';

/** Partition counts an input topic may have (as `--partitions`, but 1 is allowed for a further topic). */
export const INPUT_PARTITIONS_MAX = 1000;

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/** What a run is given beside `--partitions` for its input topics. */
export interface TopicShape {
  inputPartitions?: Readonly<Record<string, number>>;
  lateTopic?: string;
  idleCloseMs?: number;
}

/**
 * Each of the run's input topics -> its partition count: `partitions`, or the `inputPartitions` of
 * the module's name for it (`runName`: the run's name of a module topic).
 */
export function inputCounts(
  inputTopics: readonly string[],
  o: { partitions: number; inputPartitions?: Readonly<Record<string, number>> },
  runName: (topic: string) => string,
): Map<string, number> {
  const counts = new Map(inputTopics.map((t) => [t, o.partitions]));
  for (const [t, n] of Object.entries(o.inputPartitions ?? {})) counts.set(runName(t), n);
  return counts;
}

/** One `<topic>=<n>` item of `--input-partitions`; undefined when it is not one. */
export function inputPartitionsItem(s: string): [string, number] | undefined {
  const m = /^([A-Za-z0-9._-]{1,249})=([0-9]{1,4})$/.exec(s);
  if (!m) return undefined;
  const n = Number(m[2]);
  return n >= 1 && n <= INPUT_PARTITIONS_MAX ? [m[1] as string, n] : undefined;
}

/**
 * RF_INVALID_OPTIONS (naming `--input-partitions` or `--late-topic`) for a count out of bounds, a topic
 * that is no input of the module's records, a late topic that is a listed input, that no record names,
 * that is the only topic one of its patterns reads, or given with `--idle-close`.
 */
export function checkTopicShape(
  file: string,
  built: BuiltTopology,
  recordTopics: Iterable<string | undefined>,
  shape: TopicShape,
): void {
  const { input, patterns } = topicsOf(built);
  const named = new Set<string>();
  for (const t of recordTopics) if (t !== undefined) named.add(t);
  const inputs = [...new Set([...input, ...named])];
  for (const [topic, n] of Object.entries(shape.inputPartitions ?? {})) {
    if (!Number.isInteger(n) || n < 1 || n > INPUT_PARTITIONS_MAX)
      throw invalid(`--input-partitions ${topic}=${n}: a count from 1 to ${INPUT_PARTITIONS_MAX}`);
    if (!inputs.includes(topic))
      throw invalid(
        `--input-partitions ${topic}: ${file} reads no such topic (its input topics: ${inputs.join(', ') || 'none named'})`,
      );
  }
  const late = shape.lateTopic;
  if (late === undefined) return;
  if (shape.idleCloseMs !== undefined)
    throw invalid(
      '--late-topic with --idle-close: the harness reads the input topics from the start for the ticks; run them apart',
    );
  if (input.includes(late))
    throw invalid(
      `--late-topic ${late}: a listed input topic must exist when the instances start (redfence run refuses a missing one); name a topic a pattern reads`,
    );
  if (!named.has(late))
    throw invalid(
      `--late-topic ${late}: no record names it ("topic" in chaosInput's records or --input's lines), so the harness would never make it`,
    );
  for (const p of patterns.filter((x) => x.test(late)))
    if (![...named].some((t) => t !== late && p.test(t)))
      throw invalid(
        `--late-topic ${late}: it is the only topic the records name for the pattern ${patternText(p)}, so the instances would find none at start (RF_TOPIC_PATTERN_UNMATCHED); give records a topic it matches besides`,
      );
}
