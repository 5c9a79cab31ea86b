/**
 * What the verbs that reach Kafka (and Redis) share: the `--brokers` option, the connection block of
 * their option tables (brokers, the Redis target with its TLS and ACL options, the Kafka security
 * options), the Kafka client settings those options resolve to, and the one `<module>` positional of
 * `run`, `reconcile` and `rebuild`. Checking stays where it was (options.ts, redis-options.ts,
 * kafka-options.ts): this file only puts the pieces together once.
 */
import { RedfenceError } from '../errors/index.js';
import type { ProcessorDefinition } from '../index.js';
import type { ClientSettings } from '../kafka/client-config.js';
import { loadDefinition } from '../loader/load.js';
import { adapterSettings } from '../runtime/kafka-options.js';
import { KAFKA_OPTIONS, type KafkaValues, kafkaSecurity } from './kafka-options.js';
import { hostPort, listOption } from './options.js';
import { REDIS_OPTIONS } from './redis-options.js';

/** `--brokers host:port,...` (KAFKA_BROKERS). */
export const BROKERS_OPTION = listOption('<list>', {
  description: 'Kafka bootstrap servers host:port,...',
  env: 'KAFKA_BROKERS',
  default: ['127.0.0.1:9092'],
  allowed: 'host:port[,host:port...]',
  item: (s) => (hostPort(s) ? s : undefined),
});

/** The connection block of a verb that reaches Kafka and Redis: brokers, Redis, Kafka security. */
export const CONNECTION_OPTIONS = {
  brokers: BROKERS_OPTION,
  ...REDIS_OPTIONS,
  ...KAFKA_OPTIONS,
};

/**
 * The settings of a Kafka client of a CLI verb: the brokers and the Kafka security options (their
 * files read and every contradiction refused here, before anything connects).
 */
export function kafkaClient(
  o: KafkaValues & { brokers: string[] },
  clientId: string,
): Omit<ClientSettings, 'groupId'> {
  return adapterSettings({ ...kafkaSecurity(o), brokers: o.brokers }, { clientId });
}

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/** The one `<module>` argument of `redfence <verb> <module> [options]`, or RF_INVALID_OPTIONS. */
export function modulePositional(verb: string, positionals: readonly string[]): string {
  const [file, ...extra] = positionals;
  if (file === undefined)
    throw invalid(`missing <module>: redfence ${verb} <module> [options] (redfence ${verb} --help)`);
  if (extra.length > 0)
    throw invalid(`unexpected ${extra.length === 1 ? 'argument' : 'arguments'} ${extra.join(' ')}`);
  return file;
}

/**
 * The processor definition `file` exports, or RF_MODULE_INVALID when it exports a handler (`why`: what
 * the verb does with a processor's state).
 */
export async function loadProcessorModule(file: string, why: string): Promise<ProcessorDefinition> {
  const loaded = await loadDefinition(file);
  const { isHandlerDefinition } = await import('../definition/handler.js');
  if (isHandlerDefinition(loaded))
    throw new RedfenceError('RF_MODULE_INVALID', `${file} exports a handler: ${why}`);
  return loaded;
}
