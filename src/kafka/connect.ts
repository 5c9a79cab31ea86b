/**
 * Connecting a librdkafka client without waiting for ever on a configuration that cannot work. librdkafka
 * retries a refused password, an untrusted certificate or a listener of another protocol for ever, and
 * its connect call only times out (as "broker transport failure", the words of a broker that is down).
 * Its log and error lines name the cause at the first attempt, so they are watched while the client
 * connects: the first one that is an authentication or TLS failure (client-config.ts `authFailure`)
 * fails the connect at once with RF_KAFKA_AUTH. A broker that is down is not such a failure: that stays
 * librdkafka's to retry, and a connect or first call that gets no answer at all fails with
 * RF_KAFKA_UNAVAILABLE naming the brokers and the last connect failure logged. The same watch serves the admin client through its logger.
 */
import type { EventEmitter } from 'node:events';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import {
  authError,
  authFailure,
  configError,
  isUnreachable,
  transportFailure,
  unavailableError,
} from './client-config.js';

/** What a low-level client offers for this (Producer and KafkaConsumer both). */
interface Connectable extends Pick<EventEmitter, 'on' | 'removeListener'> {
  connect(options: { timeout?: number }, cb: (err: unknown) => void): unknown;
  disconnect(cb: () => void): unknown;
  isConnected(): boolean;
}

/** Collects the first authentication or TLS failure from a client's lines; `failed` rejects with it. */
export class AuthWatch {
  readonly #client: string;
  #error: RedfenceError | undefined;
  #reject: ((err: RedfenceError) => void) | undefined;
  readonly failed: Promise<never>;

  constructor(client: string) {
    this.#client = client;
    this.failed = new Promise<never>((_, reject) => {
      this.#reject = reject;
    });
    this.failed.catch(() => undefined);
  }

  #armed = true;

  get error(): RedfenceError | undefined {
    return this.#error;
  }

  /** Still watching (no call has succeeded yet). */
  get armed(): boolean {
    return this.#armed;
  }

  /** Stops watching (the client has connected once: later failures are librdkafka's to retry). */
  disarm(): void {
    this.#armed = false;
  }

  #transport: string | undefined;

  /** A connect failure was logged (nothing listens there, no such host): not a late answer. */
  get connectFailed(): boolean {
    return this.#transport !== undefined;
  }

  /**
   * What a failed call of a client that never connected means: the authentication failure seen, or
   * RF_KAFKA_UNAVAILABLE (brokers, the last connect failure logged, the options to check) when the
   * call got no answer; else `err` itself.
   */
  failure(err: unknown, brokers: string): unknown {
    if (this.#error !== undefined) return this.#error;
    if (RedfenceError.is(err) || !this.#armed || !isUnreachable(err)) return err;
    return unavailableError(brokers, this.#client, err, this.#transport);
  }

  /** One librdkafka log or error line. */
  line(text: string): void {
    if (this.#error !== undefined || !this.#armed) return;
    this.#transport = transportFailure(text) ?? this.#transport;
    const f = authFailure(text);
    if (f === undefined) return;
    this.#error = authError(this.#client, f);
    this.#reject?.(this.#error);
  }

  /** A KafkaJS-compatible logger that feeds the watch (and prints nothing). */
  logger() {
    const logger = {
      error: (message: unknown) => this.line(String(message)),
      warn: (message: unknown) => this.line(String(message)),
      info: () => undefined,
      debug: () => undefined,
      setLogLevel: () => undefined,
      namespace: () => logger,
    };
    return logger;
  }
}

/**
 * Connects `c`, failing with RF_KAFKA_AUTH as soon as its lines show an authentication or TLS failure.
 * `poll`: start librdkafka's background polling as soon as the client exists (a producer), so those
 * lines arrive while the connect's metadata request is still waiting; a consumer has no such poll and
 * reports them when the connect has timed out. The client is disconnected when the connect fails.
 */
export async function connectWatched(
  c: Connectable,
  client: string,
  options: { poll?: (on: boolean) => void; timeoutMs?: number; brokers?: string } = {},
): Promise<void> {
  const watch = new AuthWatch(client);
  const onLog = (l: { message?: unknown }) => watch.line(String(l?.message ?? ''));
  const onError = (e: { message?: unknown }) => watch.line(String(e?.message ?? ''));
  c.on('event.log', onLog);
  c.on('event.error', onError);
  // a failed OAUTHBEARER token provider is emitted as 'error' (which throws without a listener)
  c.on('error', (e: { message?: unknown }) =>
    watch.line(`oauthbearer_token_refresh_cb: ${String(e?.message ?? e)}`),
  );
  let polling: ReturnType<typeof setInterval> | undefined;
  const connected = new Promise<void>((resolve, reject) => {
    c.connect(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }, (err) =>
      err ? reject(err) : resolve(),
    );
  });
  if (options.poll !== undefined) {
    const poll = options.poll;
    polling = setInterval(() => {
      if (!c.isConnected()) return;
      clearInterval(polling);
      polling = undefined;
      poll(true);
    }, 10);
  }
  try {
    await Promise.race([connected, watch.failed]);
  } catch (err) {
    // the lines of a failed connect may come just after it
    await new Promise((r) => setImmediate(r));
    const cause = watch.failure(err, options.brokers ?? 'the bootstrap servers');
    connected.then(
      () => c.disconnect(() => undefined),
      () => undefined,
    );
    throw cause;
  } finally {
    if (polling !== undefined) clearInterval(polling);
    c.removeListener('event.log', onLog);
    c.removeListener('event.error', onError);
  }
}

/**
 * Lets librdkafka check the consumer's and the producer's properties by building the clients, without
 * connecting them; throws RF_INVALID_OPTIONS naming a property it refuses.
 */
export function checkClientConfig(consumer: Record<string, unknown>, producer: Record<string, unknown>) {
  for (const [client, build] of [
    ['consumer', () => new RdKafka.KafkaConsumer({ ...consumer } as RdKafka.ConsumerGlobalConfig, {})],
    ['producer', () => new RdKafka.Producer({ ...producer } as RdKafka.ProducerGlobalConfig)],
  ] as const) {
    try {
      build();
    } catch (err) {
      // librdkafka's own words may quote a value: kept as the cause, out of the message
      throw (
        configError(err, client) ??
        new RedfenceError('RF_INVALID_OPTIONS', `Kafka ${client} configuration: librdkafka refuses it`, {
          cause: err,
        })
      );
    }
  }
}
