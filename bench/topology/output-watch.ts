/**
 * bench/topology/failover.ts's watcher: a read_committed consumer at the end of a windowed count's output
 * (`{start, end, count}` keyed by customer), assigned and past one fetch before it returns, so that the
 * clock can start; then when the first record came, and every record's key, window start and count.
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { pollUntil } from '../../src/harness/index.js';

export interface OutputWatch {
  firstAt: () => number | undefined;
  seen: Array<{ key: string; start: number; count: number }>;
  close: () => Promise<void>;
}

export async function watchOutput(
  kafka: KafkaJS.Kafka,
  output: string,
  group: string,
  partitions: number,
): Promise<OutputWatch> {
  const consumer = kafka.consumer({
    'group.id': group,
    'auto.offset.reset': 'latest',
    'isolation.level': 'read_committed',
    kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING },
  } as unknown as KafkaJS.ConsumerConstructorConfig);
  await consumer.connect();
  await consumer.subscribe({ topics: [output] });
  const seen: OutputWatch['seen'] = [];
  let firstAt: number | undefined;
  void consumer.run({
    eachMessage: async ({ message }) => {
      firstAt ??= Date.now();
      const v = JSON.parse(message.value?.toString() ?? 'null') as { start: number; count: number };
      seen.push({ key: message.key?.toString() ?? '', start: v.start, count: v.count });
    },
  });
  await pollUntil('the watcher is assigned', () => consumer.assignment().length === partitions, 60_000, 50);
  // let it fetch once at the end before the clock starts
  await new Promise((r) => setTimeout(r, 2000));
  return { firstAt: () => firstAt, seen, close: () => consumer.disconnect().catch(() => undefined) };
}
