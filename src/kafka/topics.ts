/**
 * The start-up topic check: the input must exist; each output and dead-letter topic must exist or,
 * when asked for, is created with the input's partition count (so outputs stay co-partitioned with
 * the input). Without it a missing output topic shows only as produce timeouts and endless redelivery.
 */
import { RedfenceError } from '../errors/index.js';
import type { KafkaPort } from './types.js';

export interface EnsureTopicsOptions {
  /** The topic consumed. It must exist; it is never created. */
  input: string;
  /** The topics written: output and dead-letter (later retry) topics. */
  outputs: string[];
  /** Create missing outputs with the input's partition count instead of failing. */
  create: boolean;
  /** Replication factor of created topics. Default: the broker's default. */
  replicationFactor?: number;
}

export interface EnsureTopicsResult {
  /** The input topic's partition count. */
  inputPartitions: number;
  /** Outputs that were missing and exist now (created by this call or, racing it, by another instance). */
  created: string[];
  /** Outputs whose partition count differs from the input's (the caller may warn). */
  mismatched: { topic: string; partitions: number }[];
}

const READ_BACK_MS = 10_000;
const KNOWN = new Set<string>(['input', 'outputs', 'create', 'replicationFactor']);

function invalid(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_OPTIONS', `ensureTopics: ${message}`);
}

function validate(options: EnsureTopicsOptions): void {
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  for (const k of Object.keys(options))
    if (!KNOWN.has(k)) throw invalid(`unknown option "${k}"; known: ${[...KNOWN].join(', ')}`);
  const name = (v: unknown) => typeof v === 'string' && v.length > 0;
  if (!name(options.input)) throw invalid(`"input" must be a non-empty topic name`);
  if (!Array.isArray(options.outputs) || !options.outputs.every(name))
    throw invalid(`"outputs" must be an array of non-empty topic names`);
  if (typeof options.create !== 'boolean')
    throw invalid(`"create" must be true or false, got ${JSON.stringify(options.create)}`);
  const rf = options.replicationFactor;
  if (rf !== undefined && (!Number.isSafeInteger(rf) || rf < 1))
    throw invalid(`"replicationFactor" must be an integer >= 1, got ${JSON.stringify(rf)}`);
}

/** How a missing output is fixed, with the exact partition count to use. */
function fix(topic: string, partitions: number): string {
  return (
    `create it with ${partitions} partition${partitions === 1 ? '' : 's'} (as the input), ` +
    `e.g. kafka-topics.sh --create --topic ${topic} --partitions ${partitions}, ` +
    'or run with createTopics: true (redfence run --create-topics)'
  );
}

/** Partition counts of topics just created; a broker's metadata can take a moment to list them. */
export async function readBack(port: KafkaPort, topics: string[]): Promise<Map<string, number>> {
  const deadline = Date.now() + READ_BACK_MS;
  for (let wait = 20; ; wait = Math.min(500, wait * 2)) {
    const seen = await port.describeTopics(topics);
    const absent = topics.filter((t) => !seen.has(t));
    if (absent.length === 0) return seen;
    if (Date.now() >= deadline)
      throw new RedfenceError(
        'RF_TOPIC_MISSING',
        `created ${absent.join(', ')} but the broker did not list it within ${READ_BACK_MS} ms`,
        { details: { topics: absent } },
      );
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/**
 * Checks (and with `create`, creates) the topics a processor reads and writes. Fails with
 * RF_TOPIC_MISSING naming the topic and the fix; RF_INVALID_OPTIONS on bad options, before any call.
 *
 * @example
 * const { mismatched } = await ensureTopics(port, { input: 'orders', outputs: ['totals', 'orders.DLT'], create: false });
 */
export async function ensureTopics(
  port: KafkaPort,
  options: EnsureTopicsOptions,
): Promise<EnsureTopicsResult> {
  validate(options);
  const { input } = options;
  const outputs = [...new Set(options.outputs)].filter((t) => t !== input);
  const found = await port.describeTopics([input, ...outputs]);
  const inputPartitions = found.get(input);
  if (inputPartitions === undefined)
    throw new RedfenceError(
      'RF_TOPIC_MISSING',
      `input topic ${input} does not exist: create it (redfence never creates the topic it reads)`,
      { details: { topic: input } },
    );
  const missing = outputs.filter((t) => !found.has(t));
  if (missing.length > 0 && !options.create)
    throw new RedfenceError(
      'RF_TOPIC_MISSING',
      missing.map((t) => `topic ${t} does not exist: ${fix(t, inputPartitions)}`).join('; '),
      { details: { topics: missing } },
    );
  let created: string[] = [];
  if (missing.length > 0) {
    try {
      await port.createTopics(
        missing.map((topic) => ({
          topic,
          partitions: inputPartitions,
          ...(options.replicationFactor === undefined
            ? {}
            : { replicationFactor: options.replicationFactor }),
        })),
      );
    } catch (err) {
      // refused by the authorizer (Create): that, not a missing topic, is what to fix
      if (RedfenceError.is(err, 'RF_KAFKA_AUTH')) throw err;
      throw new RedfenceError(
        'RF_TOPIC_MISSING',
        `could not create ${missing.join(', ')}: ${(err as Error)?.message ?? String(err)}`,
        { cause: err, details: { topics: missing } },
      );
    }
    // Read back: a topic made meanwhile by another instance may have another partition count.
    for (const [t, n] of await readBack(port, missing)) found.set(t, n);
    created = missing;
  }
  const mismatched = outputs
    .map((topic) => ({ topic, partitions: found.get(topic) ?? inputPartitions }))
    .filter((o) => o.partitions !== inputPartitions);
  return { inputPartitions, created, mismatched };
}
