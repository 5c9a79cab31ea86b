/**
 * Topic metadata and creation for the Kafka adapter, over the admin client of
 * @confluentinc/kafka-javascript. Connected on first use (so topics can be checked before the consumer
 * starts) and closed with the adapter. It gets the same librdkafka properties as the consumer and the
 * producer (brokers, security, `kafka.config`); its log lines are watched (connect.ts), so a refused
 * password or certificate fails the call at once with RF_KAFKA_AUTH instead of timing out.
 */
import { setTimeout as pause } from 'node:timers/promises';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { configError } from './client-config.js';
import { AuthWatch } from './connect.js';
import { authRefusal } from './permissions.js';
import { type AuthorizedOperations, BROKER_TOPICS, type CommittedOffset, type TopicSpec } from './types.js';

type Admin = KafkaJS.Admin;

/**
 * How long a request the brokers do not answer is sent again (each try has the client's own timeout,
 * 5 s): Kafka's clients wait 60 s by default (default.api.timeout.ms); a start that gave up at the
 * first 5 s failed on a broker paused by a collection or a busy machine.
 */
const PATIENCE_MS = 30_000;

/**
 * The pause before a timed-out request is sent again: a timeout that comes back at once (the client's
 * own deadline already spent) must not turn the patience into a busy loop of requests.
 */
const RETRY_PAUSE_MS = 200;

/** librdkafka's timeout (ERR__TIMED_OUT), not a transport failure. */
function timedOut(err: unknown): boolean {
  if ((err as { code?: unknown })?.code === KafkaJS.ErrorCodes.ERR__TIMED_OUT) return true;
  return /^(?:Local: )?Timed out/i.test(err instanceof Error ? err.message : String(err));
}

/** Kafka's name of an ACL operation (KafkaJS.AclOperationTypes' number). */
const OPERATION_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(KafkaJS.AclOperationTypes).map(([k, v]) => [
    v,
    k
      .toLowerCase()
      .split('_')
      .map((w) => (w[0] ?? '').toUpperCase() + w.slice(1))
      .join(''),
  ]),
);

function opName(n: number): string {
  return OPERATION_NAMES[n] ?? String(n);
}

export class KafkaAdmin {
  readonly #kafka: KafkaJS.Kafka;
  readonly #watch = new AuthWatch('admin client');
  #admin: Promise<Admin> | undefined;
  #closed = false;
  /** bootstrap.servers, for RF_KAFKA_UNAVAILABLE. */
  readonly #brokers: string;
  /** Calls librdkafka has not answered yet (they are not abandoned when the watch fails first). */
  readonly #pending = new Set<Promise<unknown>>();

  /** OAUTHBEARER: settled once the first token was handed to librdkafka (or could not be had). */
  readonly #firstToken: Promise<void>;

  /** `properties`: librdkafka's, bootstrap.servers and client.id included. */
  constructor(properties: Record<string, unknown>) {
    // librdkafka's error lines reach the watch (and nothing else): quiet, but not blind
    const kafkaJS = { logger: this.#watch.logger(), logLevel: KafkaJS.logLevel.ERROR };
    const props = { ...properties };
    this.#brokers = String(props['bootstrap.servers'] ?? 'the bootstrap servers');
    const refresh = props.oauthbearer_token_refresh_cb;
    let tokenSet: () => void = () => undefined;
    this.#firstToken =
      typeof refresh === 'function'
        ? new Promise<void>((resolve) => {
            tokenSet = resolve;
          })
        : Promise.resolve();
    if (typeof refresh === 'function') {
      // A request sent before the first token is set waits for its whole timeout even once the token
      // is there: the first call waits for it (the client sets it right after this promise settles).
      props.oauthbearer_token_refresh_cb = (config: unknown) =>
        (refresh as (c: unknown) => Promise<unknown>)(config).finally(() => setImmediate(tokenSet));
    }
    this.#kafka = new KafkaJS.Kafka({ ...props, kafkaJS } as unknown as KafkaJS.CommonConstructorConfig);
  }

  /**
   * `call`, or RF_KAFKA_AUTH as soon as the client's lines show it cannot authenticate, or
   * RF_KAFKA_UNAVAILABLE when the first call got no answer from the brokers. A call that timed out
   * with no connect failure logged is sent again for up to `patienceMs`.
   */
  async #guard<T>(call: (admin: Admin) => Promise<T>, patienceMs = PATIENCE_MS): Promise<T> {
    const deadline = Date.now() + patienceMs;
    for (;;) {
      try {
        return await this.#guarded(call);
      } catch (err) {
        // a request timed out over a connection that was made (a broker paused, busy, loading a
        // coordinator): sent again while the patience lasts; a connect failure logged (nothing listens
        // there, no such host) fails at once with RF_KAFKA_UNAVAILABLE
        const late = timedOut(err) && !this.#watch.connectFailed && this.#watch.error === undefined;
        if (!late || this.#closed || Date.now() >= deadline) throw this.#watch.failure(err, this.#brokers);
      }
      await pause(Math.min(RETRY_PAUSE_MS, Math.max(0, deadline - Date.now())));
    }
  }

  async #guarded<T>(call: (admin: Admin) => Promise<T>): Promise<T> {
    if (this.#watch.error) throw this.#watch.error;
    const admin = await Promise.race([this.#client(), this.#watch.failed]);
    const pending = call(admin);
    const settled = pending.then(
      () => undefined,
      () => undefined,
    );
    this.#pending.add(settled);
    void settled.then(() => this.#pending.delete(settled));
    const result = await Promise.race([pending, this.#watch.failed]);
    this.#watch.disarm();
    return result;
  }

  /** The admin client, connecting it on first use; a failed connect is tried again by the next call. */
  async #client(): Promise<Admin> {
    if (this.#closed) throw new RedfenceError('RF_INVALID_STATE', 'the Kafka adapter is stopped');
    if (this.#admin === undefined) {
      const admin = this.#kafka.admin();
      const connecting = admin
        .connect()
        .then(() => this.#firstToken)
        .then(() => admin)
        .catch((err: unknown) => {
          throw configError(err, 'admin client') ?? err;
        });
      this.#admin = connecting;
      connecting.catch(() => {
        if (this.#admin === connecting) this.#admin = undefined;
      });
    }
    return this.#admin;
  }

  async describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const one = async (admin: Admin, topic: string) => {
      try {
        const meta = await admin.fetchTopicMetadata({ topics: [topic] });
        const n = meta[0]?.partitions.length ?? 0;
        if (n > 0) out.set(topic, n);
      } catch (err) {
        if ((err as { code?: unknown })?.code !== KafkaJS.ErrorCodes.ERR_UNKNOWN_TOPIC_OR_PART)
          throw (
            authRefusal(err, { topic, topicOperation: 'Describe', when: 'refuse describing topics' }) ?? err
          );
      }
    };
    // One request per topic: a request naming a missing topic fails as a whole. Until a first call has
    // succeeded, one request goes first: when the brokers refuse the client, librdkafka's disconnect
    // (and the process's exit) waits for every request in flight to time out.
    const [first, ...rest] = [...new Set(topics)];
    if (first === undefined) return out;
    if (this.#watch.armed) await this.#guard((admin) => one(admin, first));
    else rest.unshift(first);
    await this.#guard((admin) => Promise.all(rest.map((topic) => one(admin, topic))));
    return out;
  }

  /** The cluster's topic names, sorted, the broker's internal topics left out (KafkaPort.listTopics). */
  async listTopics(): Promise<string[]> {
    const names = await this.#guard((admin) => admin.listTopics());
    return names.filter((t) => !BROKER_TOPICS.has(t)).sort();
  }

  /**
   * Which of `topics` the principal may not write (KafkaPort.unwritableTopics): the brokers list a
   * topic's authorized operations; without an authorizer they list every one, and a topic they list
   * nothing for (or do not know) is not reported.
   */
  async unwritableTopics(topics: readonly string[]): Promise<string[]> {
    const names = [...new Set(topics)];
    if (names.length === 0) return [];
    const meta = await this.#guard((admin) =>
      admin.fetchTopicMetadata({ topics: names, includeAuthorizedOperations: true } as never),
    );
    const out: string[] = [];
    for (const t of meta as Array<{ name: string; authorizedOperations?: number[] }>) {
      const ops = t.authorizedOperations;
      if (ops === undefined || ops.length === 0) continue;
      if (!ops.includes(KafkaJS.AclOperationTypes.WRITE) && !ops.includes(KafkaJS.AclOperationTypes.ALL))
        out.push(t.name);
    }
    return out.sort();
  }

  /**
   * The operations the brokers' authorizer allows this principal on `topics` and on `group`
   * (KafkaPort.authorizedOperations): DescribeTopics and DescribeGroups with their authorized
   * operations. A topic the principal may not even describe gets an empty list; one that does not exist,
   * or that the brokers list nothing for (an older broker), is absent, as is a group they tell nothing of.
   */
  async authorizedOperations(r: {
    topics: readonly string[];
    group?: string;
  }): Promise<AuthorizedOperations> {
    const topics = new Map<string, readonly string[]>();
    const one = async (admin: Admin, topic: string) => {
      try {
        const meta = await admin.fetchTopicMetadata({
          topics: [topic],
          includeAuthorizedOperations: true,
        } as never);
        const ops = (meta[0] as { authorizedOperations?: number[] } | undefined)?.authorizedOperations;
        if (ops !== undefined && ops.length > 0) topics.set(topic, ops.map(opName));
      } catch (err) {
        const code = (err as { code?: unknown })?.code;
        if (code === KafkaJS.ErrorCodes.ERR_TOPIC_AUTHORIZATION_FAILED) topics.set(topic, []);
        else if (code !== KafkaJS.ErrorCodes.ERR_UNKNOWN_TOPIC_OR_PART) throw err;
      }
    };
    const names = [...new Set(r.topics)];
    if (names.length > 0) await this.#guard((admin) => Promise.all(names.map((t) => one(admin, t))));
    if (r.group === undefined) return { topics };
    const group = r.group;
    const described = await this.#guard((admin) =>
      admin.describeGroups([group], { includeAuthorizedOperations: true }).catch((err: unknown) => {
        if ((err as { code?: unknown })?.code === KafkaJS.ErrorCodes.ERR_GROUP_AUTHORIZATION_FAILED)
          return { groups: [{ error: err, authorizedOperations: [] }] };
        throw err;
      }),
    );
    const g = described.groups[0] as
      | { error?: { code?: unknown } | null; authorizedOperations?: number[] }
      | undefined;
    if (g?.error?.code === KafkaJS.ErrorCodes.ERR_GROUP_AUTHORIZATION_FAILED) return { topics, group: [] };
    const ops = g?.authorizedOperations;
    return ops !== undefined && ops.length > 0 ? { topics, group: ops.map(opName) } : { topics };
  }

  async createTopics(topics: readonly TopicSpec[]): Promise<void> {
    if (topics.length === 0) return;
    try {
      // A topic that exists already (another instance made it meanwhile) is not an error here.
      await this.#guard((admin) =>
        admin.createTopics({
          topics: topics.map((t) => ({
            topic: t.topic,
            numPartitions: t.partitions,
            replicationFactor: t.replicationFactor ?? -1,
            ...(t.config === undefined
              ? {}
              : { configEntries: Object.entries(t.config).map(([name, value]) => ({ name, value })) }),
          })),
        }),
      );
    } catch (err) {
      if (RedfenceError.is(err)) throw err;
      const inner = (err as { errors?: unknown })?.errors;
      for (const e of [err, ...(Array.isArray(inner) ? inner : [])]) {
        const refused = authRefusal(e, {
          topicOperation: 'Create',
          topic: topics.map((t) => t.topic).join(', '),
          when: 'refuse creating topics',
        });
        if (refused !== undefined) throw refused;
      }
      const reasons = Array.isArray(inner) ? inner.map((e) => (e as Error)?.message).join('; ') : '';
      throw new Error(`Kafka: cannot create topics: ${reasons || (err as Error)?.message}`, { cause: err });
    }
  }

  /**
   * Every partition's earliest offset (low) and high watermark, however many partitions the topic has
   * in one metadata request and two ListOffsets requests (a broker each), never one call per partition;
   * RF_TOPIC_MISSING with `missing` (or a message naming the topic) when the topic does not exist.
   * `timeoutMs` bounds the three requests together (default 5000, tried again while the brokers are
   * late, as every call here; with `timeoutMs` given, tried once).
   */
  async watermarks(
    topic: string,
    o: { timeoutMs?: number; missing?: string } = {},
  ): Promise<Map<number, { low: number; high: number }>> {
    // a bound the caller gave is kept: no try after it
    const rows = await this.#guard(
      (admin) =>
        admin
          .fetchTopicOffsets(topic, {
            timeout: o.timeoutMs ?? 5000,
            isolationLevel: KafkaJS.IsolationLevel.READ_UNCOMMITTED,
          })
          .catch((err: unknown) => {
            if ((err as { code?: unknown })?.code === KafkaJS.ErrorCodes.ERR_UNKNOWN_TOPIC_OR_PART)
              throw new RedfenceError('RF_TOPIC_MISSING', o.missing ?? `no such topic: ${topic}`, {
                details: { topics: [topic] },
              });
            throw err;
          }),
      o.timeoutMs === undefined ? PATIENCE_MS : 0,
    );
    if (rows.length === 0)
      throw new RedfenceError('RF_TOPIC_MISSING', o.missing ?? `no such topic: ${topic}`, {
        details: { topics: [topic] },
      });
    return new Map(
      rows
        .sort((a, b) => a.partition - b.partition)
        .map((r) => [r.partition, { low: Number(r.low), high: Number(r.high) }]),
    );
  }

  async highWatermarks(topic: string): Promise<Map<number, number>> {
    const rows = await this.#guard((admin) => admin.fetchTopicOffsets(topic));
    return new Map(rows.map((r) => [r.partition, Number(r.high)]));
  }

  /** Deletes each partition's records below `offset` (DeleteRecords: the log's start moves up to it). */
  async deleteRecords(topic: string, below: readonly { partition: number; offset: number }[]): Promise<void> {
    if (below.length === 0) return;
    const partitions = below.map((b) => ({ partition: b.partition, offset: String(b.offset) }));
    await this.#guard((admin) => admin.deleteTopicRecords({ topic, partitions })).catch((err: unknown) => {
      throw authRefusal(err, { topic, topicOperation: 'Delete', when: 'refuse DeleteRecords' }) ?? err;
    });
  }

  /** Low watermarks (the earliest offset the log still holds) of a topic's partitions. */
  async lowWatermarks(topic: string): Promise<Map<number, number>> {
    const rows = await this.#guard((admin) => admin.fetchTopicOffsets(topic));
    return new Map(rows.map((r) => [r.partition, Number(r.low)]));
  }

  /**
   * The partitions' end offsets: the last stable offset (`readCommitted`: what a read_committed
   * consumer can reach; an open transaction holds it back) or the high watermark.
   */
  async endOffsets(topic: string, readCommitted: boolean): Promise<Map<number, number>> {
    const isolationLevel = readCommitted
      ? KafkaJS.IsolationLevel.READ_COMMITTED
      : KafkaJS.IsolationLevel.READ_UNCOMMITTED;
    const rows = await this.#guard((admin) => admin.fetchTopicOffsets(topic, { isolationLevel }));
    return new Map(rows.map((r) => [r.partition, Number(r.offset)]));
  }

  /** A group's committed offsets by topic and partition (a partition never committed: absent). */
  async groupOffsets(group: string, topics?: readonly string[]): Promise<Map<string, Map<number, number>>> {
    const commits = await this.groupCommits(group, topics);
    return new Map([...commits].map(([topic, m]) => [topic, new Map([...m].map(([p, c]) => [p, c.offset]))]));
  }

  /**
   * A group's committed offsets with their metadata ('' when none) by topic and partition (a partition
   * never committed: absent), read from any process, member of the group or not.
   */
  async groupCommits(
    group: string,
    topics?: readonly string[],
  ): Promise<Map<string, Map<number, CommittedOffset>>> {
    const rows = await this.#guard((admin) =>
      admin.fetchOffsets({ groupId: group, ...(topics ? { topics: [...topics] } : {}) }),
    );
    const out = new Map<string, Map<number, CommittedOffset>>();
    for (const t of rows) {
      const m = new Map<number, CommittedOffset>();
      for (const p of t.partitions)
        if (p.error == null && Number(p.offset) >= 0)
          m.set(p.partition, { offset: Number(p.offset), metadata: p.metadata ?? '' });
      out.set(t.topic, m);
    }
    return out;
  }

  /** The partitions the group's live members own now (`topic:partition`), and the group's state. */
  async groupOwners(group: string): Promise<{ state: string; owned: Set<string> }> {
    // Until a first call has succeeded, a metadata request goes first: describeGroups sent to brokers
    // that do not answer can crash the process (SIGSEGV in the client's native code, 4 of 6 tries
    // against a closed port), so the unreachable brokers are found by a call that fails cleanly
    if (this.#watch.armed) await this.#guard((admin) => admin.listTopics());
    const d = await this.#guard((admin) => admin.describeGroups([group]));
    const g = d.groups[0];
    const owned = new Set<string>();
    for (const m of g?.members ?? [])
      for (const tp of m.assignment?.topicPartitions ?? []) owned.add(`${tp.topic}:${tp.partition}`);
    return { state: String(g?.state ?? 'UNKNOWN'), owned };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const admin = this.#admin;
    this.#admin = undefined;
    const disconnect = () => admin?.then((a) => a.disconnect()).catch(() => undefined);
    // librdkafka's disconnect blocks until the calls in flight are answered (they time out): after a
    // failed watch it waits for them in the background instead of holding the caller
    if (this.#watch.error !== undefined && this.#pending.size > 0) {
      void Promise.all(this.#pending).then(disconnect);
      return;
    }
    await disconnect();
  }
}
