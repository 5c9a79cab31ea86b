/**
 * The options every long-running runtime shares (the processor, the handler, the invalidation consumer
 * and, for `logger`, the outbox relay): their one declaration and documentation (`RuntimeOptions`) and
 * their one check (`resolveRuntimeOptions`). Each runtime's options extend or pick from
 * `RuntimeOptions`; its resolver calls `resolveRuntimeOptions` once, which refuses unknown keys (naming
 * the key and listing the runtime's known ones) and checks and fills in the shared fields it takes, and
 * then checks only its own. What differs between runtimes is a parameter (`RuntimeSpec`): which shared
 * fields it takes, the default group id, the default `closeTimeoutMs`, the metrics methods it calls and
 * its name in messages. Every error is RF_INVALID_OPTIONS naming the option.
 */
import type { KafkaPort } from '../kafka/types.js';
import type { HealthState, RedfenceMetrics } from '../metrics/index.js';
import {
  bool,
  checkKeys,
  fn,
  integer,
  invalid,
  isObject,
  MAX_TIMER_MS,
  text,
  withMethods,
} from '../options/checks.js';
import { type ResolvedTracing, type TracingOption, tracingOption } from '../telemetry/options.js';
import { type KafkaOptions, kafkaOptions } from './kafka-options.js';
import { type Logger, silentLogger } from './logger.js';

/**
 * The options every runtime shares, documented once here. The processor takes all but
 * `closeTimeoutMs`; the handler and the invalidation consumer take all; the outbox relay takes `logger`
 * (its `metrics` is a registry and its `kafka` the security settings beside `brokers`: docs/outbox.md).
 */
export interface RuntimeOptions {
  /** Kafka: connection settings for the default adapter, or any KafkaPort. */
  kafka: KafkaOptions | KafkaPort;
  /**
   * Consumer group. Default: the processor's `redfence-<store>`; a handler's and an invalidation
   * consumer's `redfence-handler-<name>`.
   */
  groupId?: string;
  /** This instance's id: its Kafka client id `redfence-<id>` and the processor's transactional id suffix. Default: random. */
  instanceId?: string;
  /** A pino-compatible logger (`debug`, `info`, `warn`, `error`). Default: silent. */
  logger?: Logger;
  /** The runtime's counters and gauges (`RedfenceMetrics`). Default: none. */
  metrics?: RedfenceMetrics;
  /**
   * Liveness/readiness state for /livez and /readyz: live while the runtime's loops make progress
   * (a handler: its commit timer and poll loop), ready once started.
   */
  health?: HealthState;
  /**
   * Called once when Kafka reports a fatal error (e.g. the processor's transactional producer was
   * fenced by another instance with the same id). The runtime has started closing itself; restart it.
   */
  onFatal?: (error: Error) => void;
  /**
   * OpenTelemetry spans (docs/operations.md, "Traces"): `true` or `{ tracer }`. Default off. The
   * processor and the topology processor trace batches, a handler each handle call; the invalidation
   * consumer accepts it and makes no spans.
   */
  tracing?: TracingOption;
  /**
   * Start-up fails with RF_TOPIC_MISSING naming a missing topic: the input must exist, and the
   * dead-letter (and the processor's output) topics too unless this is `true`, which creates them with
   * the input's partition count (outputs stay co-partitioned with the input). Default false.
   */
  createTopics?: boolean;
  /**
   * On close(), how long in-flight work (running handle calls, an invalidation consumer's batches) gets
   * to finish before it is abandoned to the partition's next owner. Default 30000.
   */
  closeTimeoutMs?: number;
}

/** The name of a shared option. */
export type RuntimeField = keyof RuntimeOptions;

/** The shared options after the check, with their defaults filled in. */
export interface ResolvedRuntimeOptions {
  readonly kafka: { readonly port: KafkaPort } | { readonly settings: KafkaOptions };
  readonly groupId: string;
  readonly instanceId: string | undefined;
  readonly logger: Logger;
  readonly metrics: RedfenceMetrics | undefined;
  readonly health: HealthState | undefined;
  readonly onFatal: ((error: Error) => void) | undefined;
  readonly tracing: ResolvedTracing | undefined;
  readonly createTopics: boolean;
  readonly closeTimeoutMs: number;
}

/** What differs between the runtimes' shared options. */
interface SpecBase<F extends RuntimeField> {
  /** The runtime as messages name it (`processor`, `handler`, `invalidation consumer`, `outbox relay`). */
  readonly what: string;
  /** The shared options it takes: a `keyof` table, so the compiler keeps it in step with its interface. */
  readonly fields: Readonly<Record<F, true>>;
  /** Its own options (for the unknown-key check; listed first in the error). */
  readonly own: Readonly<Record<string, true>>;
  /** The default of `closeTimeoutMs`. Default 30000. */
  readonly closeTimeoutMs?: number;
}

/**
 * What differs between the runtimes: with `groupId` among its fields a runtime must give the default
 * group id, with `metrics` the methods of `RedfenceMetrics` it calls (the compiler asks for them).
 */
export type RuntimeSpec<F extends RuntimeField> = SpecBase<F> &
  ('groupId' extends F ? { readonly groupId: string } : unknown) &
  ('metrics' extends F ? { readonly metricsMethods: readonly string[] } : unknown);

type Spec = SpecBase<RuntimeField> & { readonly groupId: string; readonly metricsMethods: readonly string[] };

/** One check per shared option; the order of this table is the order they are checked in. */
const CHECKS: { readonly [K in RuntimeField]: (v: unknown, s: Spec) => ResolvedRuntimeOptions[K] } = {
  kafka: (v, s) => kafkaOptions(v, s.what),
  groupId: (v, s) => text('groupId', v) ?? s.groupId,
  instanceId: (v) => text('instanceId', v),
  logger: (v) =>
    withMethods<Logger>('logger', v, ['debug', 'info', 'warn', 'error'], 'a pino-compatible logger') ??
    silentLogger,
  metrics: (v, s) => withMethods<RedfenceMetrics>('metrics', v, s.metricsMethods, 'a RedfenceMetrics'),
  health: (v) => withMethods<HealthState>('health', v, ['markProgress', 'setReady'], 'a HealthState'),
  onFatal: (v) => (v === undefined ? undefined : fn('onFatal', v)),
  tracing: (v, s) => tracingOption(v, s.what),
  createTopics: (v) => bool('createTopics', v, false),
  closeTimeoutMs: (v, s) => integer('closeTimeoutMs', v, 0, MAX_TIMER_MS, s.closeTimeoutMs ?? 30_000),
};

/** Every shared option, in the order they are checked. */
export const RUNTIME_FIELDS = Object.keys(CHECKS) as readonly RuntimeField[];

/**
 * Checks a runtime's options object once: that it is an object, that it has no key outside the shared
 * fields the runtime takes and its own (the error names the key and lists the known ones), and every
 * shared field it takes, filling in the defaults. Its own options are the caller's to check.
 */
export function resolveRuntimeOptions<F extends RuntimeField>(
  options: unknown,
  spec: RuntimeSpec<F>,
): Pick<ResolvedRuntimeOptions, F> {
  if (!isObject(options)) throw invalid(`${spec.what} options must be an object`);
  checkKeys('', options, { ...spec.own, ...spec.fields }, spec.what);
  const out: Partial<Record<RuntimeField, unknown>> = {};
  for (const k of RUNTIME_FIELDS)
    if (Object.hasOwn(spec.fields, k)) out[k] = CHECKS[k](options[k], spec as unknown as Spec);
  return out as Pick<ResolvedRuntimeOptions, F>;
}
