/**
 * Topic metadata and creation for the Kafka adapter, over the admin client of
 * @confluentinc/kafka-javascript. Connected on first use (so topics can be checked before the consumer
 * starts) and closed with the adapter.
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import type { TopicSpec } from './types.js';

type Admin = KafkaJS.Admin;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

export class KafkaAdmin {
  readonly #kafka: KafkaJS.Kafka;
  #admin: Promise<Admin> | undefined;
  #closed = false;

  constructor(brokers: readonly string[], clientId: string) {
    this.#kafka = new KafkaJS.Kafka({ 'client.id': clientId, kafkaJS: { brokers: [...brokers], ...quiet } });
  }

  /** The admin client, connecting it on first use; a failed connect is tried again by the next call. */
  async #client(): Promise<Admin> {
    if (this.#closed) throw new RedfenceError('RF_INVALID_STATE', 'the Kafka adapter is stopped');
    if (this.#admin === undefined) {
      const admin = this.#kafka.admin({ kafkaJS: quiet } as KafkaJS.AdminConstructorConfig);
      const connecting = admin.connect().then(() => admin);
      this.#admin = connecting;
      connecting.catch(() => {
        if (this.#admin === connecting) this.#admin = undefined;
      });
    }
    return this.#admin;
  }

  async describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    const admin = await this.#client();
    const out = new Map<string, number>();
    // One request per topic: a request naming a missing topic fails as a whole.
    await Promise.all(
      [...new Set(topics)].map(async (topic) => {
        try {
          const meta = await admin.fetchTopicMetadata({ topics: [topic] });
          const n = meta[0]?.partitions.length ?? 0;
          if (n > 0) out.set(topic, n);
        } catch (err) {
          if ((err as { code?: unknown })?.code !== KafkaJS.ErrorCodes.ERR_UNKNOWN_TOPIC_OR_PART) throw err;
        }
      }),
    );
    return out;
  }

  async createTopics(topics: readonly TopicSpec[]): Promise<void> {
    if (topics.length === 0) return;
    const admin = await this.#client();
    try {
      // A topic that exists already (another instance made it meanwhile) is not an error here.
      await admin.createTopics({
        topics: topics.map((t) => ({
          topic: t.topic,
          numPartitions: t.partitions,
          replicationFactor: t.replicationFactor ?? -1,
        })),
      });
    } catch (err) {
      const inner = (err as { errors?: unknown })?.errors;
      const reasons = Array.isArray(inner) ? inner.map((e) => (e as Error)?.message).join('; ') : '';
      throw new Error(`Kafka: cannot create topics: ${reasons || (err as Error)?.message}`, { cause: err });
    }
  }

  async highWatermarks(topic: string): Promise<Map<number, number>> {
    const rows = await (await this.#client()).fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.high)]));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const admin = this.#admin;
    this.#admin = undefined;
    await admin?.then((a) => a.disconnect()).catch(() => undefined);
  }
}
