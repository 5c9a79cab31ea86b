/**
 * Kafka ACL cases on the secured dev broker (its StandardAuthorizer allows everything on a resource
 * without ACLs): each case restricts only its own topics, group or transactional ids for the principal
 * User:redfence (allow All, deny the operation under test), runs one runtime against them over
 * SCRAM-SHA-512, and says what the runtime did: refused at start (with which error), closed while
 * running (onFatal), or kept running (what it produced and committed meanwhile).
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import type { Redis } from 'ioredis';
import { createHandler, defineHandler, defineProcessor, Processor } from '../../src/index.js';
import { createInvalidation, defineInvalidation } from '../../src/kit/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { pollUntil } from '../helpers/kafka.js';
import {
  aclTool,
  createSecureTopics,
  LISTENERS,
  pem,
  produceSecure,
  readSecureToEnd,
  secret,
} from '../helpers/secure-kafka.js';

export const USER = 'User:redfence';

/** The runtime's Kafka settings: SCRAM-SHA-512 over SASL_SSL as User:redfence. */
export function securedKafka() {
  return {
    brokers: [LISTENERS.saslSsl],
    sasl: { mechanism: 'SCRAM-SHA-512' as const, username: 'redfence', password: secret('scram') },
    ssl: { ca: pem('ca.crt') },
    sessionTimeoutMs: 6000,
  };
}

/** An ACL resource as AclCommand takes it: `['--topic', name]`, `['--group', name]`, ... */
export type Resource = readonly string[];

/**
 * Denies `operation` on `resource` to User:redfence (and allows the rest there: once a resource has an
 * ACL, what is not allowed on it is denied). Returns the grant: removes every ACL of the resource.
 */
export async function deny(resource: Resource, operation: string): Promise<() => Promise<void>> {
  await aclTool('--add', '--allow-principal', USER, '--operation', 'All', ...resource);
  await aclTool('--add', '--deny-principal', USER, '--operation', operation, ...resource);
  let granted = false;
  return async () => {
    if (granted) return;
    granted = true;
    await aclTool('--remove', '--force', ...resource);
  };
}

/**
 * Many denials in a few AclCommand runs (each starts a JVM): one allowing All on every resource, one
 * per operation denying it where asked. Returns the grant: removes every ACL of those resources.
 */
export async function denyEach(
  denials: ReadonlyArray<{ readonly resource: Resource; readonly operation: string }>,
): Promise<() => Promise<void>> {
  const all = denials.flatMap((d) => d.resource);
  await aclTool('--add', '--allow-principal', USER, '--operation', 'All', ...all);
  for (const op of new Set(denials.map((d) => d.operation))) {
    const on = denials.filter((d) => d.operation === op).flatMap((d) => d.resource);
    await aclTool('--add', '--deny-principal', USER, '--operation', op, ...on);
  }
  let granted = false;
  return async () => {
    if (granted) return;
    granted = true;
    await aclTool('--remove', '--force', ...all);
  };
}

/** The group's committed offsets of `topic`, summed over its partitions (internal listener). */
export async function committedSum(groupId: string, topic: string): Promise<number> {
  const admin = new KafkaJS.Kafka({
    kafkaJS: { brokers: [LISTENERS.internal], logLevel: KafkaJS.logLevel.NOTHING },
  }).admin();
  await admin.connect();
  try {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return (t?.partitions ?? []).reduce((a, p) => a + Math.max(0, Number(p.offset)), 0);
  } finally {
    await admin.disconnect();
  }
}

export interface Runtime {
  start(): Promise<void>;
  close(): Promise<void>;
}

/** What a runtime heard: its fatal errors and its warnings (by message). */
export class Heard {
  readonly fatals: Error[] = [];
  readonly warnings = new Map<string, number>();
  readonly logger = {
    debug() {},
    info() {},
    warn: (_o: object, m?: string) => this.#count(m),
    error: (_o: object, m?: string) => this.#count(m),
  };
  readonly onFatal = (err: Error) => {
    this.fatals.push(err);
  };
  #count(m: string | undefined) {
    const k = m ?? '';
    this.warnings.set(k, (this.warnings.get(k) ?? 0) + 1);
  }
}

/** The instance id of the processors here: their transactional id is `<group>-i1`. */
export const INSTANCE = 'i1';

/** One case's names: the input, output, dead-letter topic, group and transactional id, all under `ns`. */
export function names(ns: string) {
  return {
    input: `${ns}-in`,
    output: `${ns}-out`,
    dlt: `${ns}-in.DLT`,
    snapshot: `${ns}-snapshot`,
    group: `${ns}-g`,
    transactionalId: `${ns}-g-${INSTANCE}`,
  };
}

/** The secured topics of a processor or handler case (input, output, dead letter; `extra` too). */
export function caseTopics(ns: string, extra: string[] = [], partitions = 2) {
  const n = names(ns);
  return createSecureTopics(
    [n.input, n.output, n.dlt, ...extra].map((topic) => ({
      topic,
      partitions: topic === n.dlt ? 1 : partitions,
    })),
  );
}

/** `count` records over keys k0..k3 (and, with `nullKeys`, as many more without a key: dead letters). */
export async function produceCase(ns: string, count: number, nullKeys = 0): Promise<void> {
  const msgs = Array.from({ length: count }, (_, i) => ({ key: `k${i % 4}`, value: JSON.stringify({ i }) }));
  for (let i = 0; i < nullKeys; i++) msgs.push({ key: null as unknown as string, value: '{"i":-1}' });
  await produceSecure(names(ns).input, msgs);
}

/** A processor counting each key's records into its output. */
export function processorOf(
  ns: string,
  redis: Redis,
  mode: 'at-least-once' | 'exactly-once',
  heard: Heard,
  snapshotTopic?: string,
) {
  const n = names(ns);
  return new Processor({
    ...(snapshotTopic === undefined ? {} : { snapshot: { topic: snapshotTopic } }),
    definition: defineProcessor({
      input: n.input,
      output: n.output,
      store: ns,
      operation: () => ({ op: 'add', by: 1 }),
    }),
    redis,
    mode,
    groupId: n.group,
    instanceId: INSTANCE,
    kafka: securedKafka(),
    logger: heard.logger,
    onFatal: heard.onFatal,
  });
}

/** A cache invalidation consumer of the case's input (entries `<ns>:{tenant}:{id}`; its dead letters: the case's). */
export function invalidationOf(ns: string, redis: Redis, heard: Heard) {
  const n = names(ns);
  return createInvalidation(
    defineInvalidation<{ tenant: string; id: string }>({
      input: { topic: n.input },
      name: ns,
      cache: ns,
      keys: `${ns}:{tenant}:{id}`,
    }),
    { kafka: securedKafka(), groupId: n.group, redis, logger: heard.logger, onFatal: heard.onFatal },
  );
}

/**
 * A handler whose records with key `k0` fail (dead-lettered at once, or with `retryTopics` retried
 * through one retry topic, `<input>-retry-200`, then dead-lettered) and the rest succeed, each success
 * counted by key in `seen`.
 */
export function handlerOf(ns: string, heard: Heard, seen: Map<string, number>, retryTopics = false) {
  const n = names(ns);
  return createHandler(
    defineHandler({
      input: n.input,
      name: 'acl',
      ...(retryTopics
        ? {
            retry: {
              topics: {
                backoff: { kind: 'fixed' as const, delayMs: 200 },
                maxAttempts: 2,
                dlt: 'always' as const,
              },
            },
          }
        : {}),
      handle: async (r) => {
        // without retry topics: a decoding error (fatal: dead-lettered at once); with: retriable
        if (String(r.key) === 'k0')
          throw retryTopics ? new Error('k0 always fails') : new SyntaxError('k0 never parses');
        seen.set(String(r.key), (seen.get(String(r.key)) ?? 0) + 1);
      },
    }),
    {
      kafka: securedKafka(),
      groupId: n.group,
      commitIntervalMs: 100,
      logger: heard.logger,
      onFatal: heard.onFatal,
    },
  );
}

export function retryTopicOf(ns: string): string {
  return `${names(ns).input}-retry-200`;
}

/** A topology counting records per key after a key change: input -> repartition topic -> count -> output. */
export function countTopology(ns: string): BuiltTopology {
  const s = serdes.string();
  const t = topology({ applicationId: ns });
  t.stream<string, string>(names(ns).input, { key: s, value: s })
    .selectKey((k) => `${k}`)
    .groupByKey()
    .count({ name: 'counts' })
    .toStream()
    .to(names(ns).output, { key: s });
  return t.build();
}

export function topologyOf(
  ns: string,
  redis: Redis,
  mode: 'at-least-once' | 'exactly-once',
  heard: Heard,
  built = countTopology(ns),
) {
  return new TopologyProcessor({
    topology: built,
    redis,
    mode,
    groupId: names(ns).group,
    instanceId: INSTANCE,
    deadLetterTopic: names(ns).dlt,
    repartitionPurgeIntervalMs: 0,
    kafka: securedKafka(),
    logger: heard.logger,
    onFatal: heard.onFatal,
  });
}

/** What a runtime did within `forMs` of its start. */
export interface Outcome {
  readonly started: boolean;
  /** The error start() failed with, or the first fatal error while running. */
  readonly error?: Error;
  /** The warnings heard, by message. */
  readonly warnings: ReadonlyMap<string, number>;
}

/**
 * Starts `r` and watches it until it is refused, closes on its own, or `done()` holds, for at most
 * `forMs`; then closes it. Never throws for what the runtime does.
 */
export async function watch(
  r: Runtime,
  heard: Heard,
  forMs: number,
  done: () => Promise<boolean> | boolean,
): Promise<Outcome> {
  const started = await r.start().then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  if (started !== undefined) {
    await r.close().catch(() => undefined);
    return { started: false, error: started, warnings: heard.warnings };
  }
  await pollUntil(
    'refused, closed or done',
    async () => heard.fatals.length > 0 || (await done()),
    forMs,
  ).catch(() => undefined);
  await r.close().catch(() => undefined);
  return { started: true, ...(heard.fatals[0] ? { error: heard.fatals[0] } : {}), warnings: heard.warnings };
}

/** Records of `topic` by key (internal listener, read_committed, to the end offsets). */
export async function perKey(topic: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const r of await readSecureToEnd(topic)) {
    const k = r.key === null ? '(null)' : r.key.toString();
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}

/** The missing permissions an RF_KAFKA_AUTH names (details.missing), as `Operation resource name`. */
export function missingOf(err: unknown): string[] {
  const m = (err as { details?: { missing?: Array<{ operation: string; resource: string; name: string }> } })
    ?.details?.missing;
  return (m ?? []).map((p) => `${p.operation} ${p.resource} ${p.name}`);
}
