/**
 * The instance registry: every running service (processor, handler, invalidation consumer, outbox
 * relay) that has a Redis writes a hash `rf:instances:<id>` with a PX heartbeat TTL and its id in the
 * index `rf:instances` (scored by the heartbeat's expiry), refreshed every `heartbeatMs`; deleted on
 * close. An instance that dies stops refreshing and ages out: its hash expires and the console drops
 * index entries whose score has passed. A registry write that fails is ignored (never a runtime
 * error): the registry is for operators, not for correctness.
 *
 * ```ts
 * const registration = instanceRegistration(redis, 'processor', () => ({ id, group, module: 'totals' }));
 * // new Lifecycle({ ..., registration }) starts it once running and stops it on close
 * ```
 */
import { hostname } from 'node:os';
import { INSTANCE_INDEX_KEY, instanceKey } from '../keys/instances.js';
import { VERSION } from '../version.js';

export type InstanceKind = 'processor' | 'handler' | 'invalidation' | 'relay';

/** What an instance says of itself (read again at each heartbeat). */
export interface InstanceInfo {
  id: string;
  group?: string;
  /** The store, handler or relay name. */
  module?: string;
  mode?: string;
  /** Owned partitions and the epochs acquired for them, when known. */
  partitions?: ReadonlyArray<{ topic: string; partition: number; epoch?: number }>;
}

/** The Redis calls the registry makes (ioredis Redis and Cluster both have them). */
export interface RegistryRedis {
  hset(key: string, data: Record<string, string>): Promise<unknown>;
  pexpire(key: string, ms: number): Promise<unknown>;
  zadd(key: string, score: number, member: string): Promise<unknown>;
  zrem(key: string, member: string): Promise<unknown>;
  zremrangebyscore(key: string, min: number | string, max: number | string): Promise<unknown>;
  del(key: string): Promise<unknown>;
}

/** Process-wide facts a CLI knows and a library runtime does not (the metrics server's address). */
const processFacts: { metrics?: string } = {};

/**
 * The address a metrics server bound to `host` is reached at, `host:port` (`[v6]:port`): the host
 * itself, or this machine's hostname when it listens on every interface (0.0.0.0, ::).
 *
 * ```ts
 * metricsAddressOf('127.0.0.1', 9464); // '127.0.0.1:9464'
 * metricsAddressOf('0.0.0.0', 9464);   // `${hostname()}:9464`
 * ```
 */
export function metricsAddressOf(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '::' || host === '' ? hostname() : host;
  return h.includes(':') && !h.startsWith('[') ? `[${h}]:${port}` : `${h}:${port}`;
}

/**
 * Sets the metrics address every registration of this process reports: the host the metrics server
 * is bound to and its port (`redfence run` calls it once listening), see {@link metricsAddressOf}.
 */
export function setRegistryMetricsAddress(host: string, port: number): void {
  processFacts.metrics = metricsAddressOf(host, port);
}

export const HEARTBEAT_MS = 5000;
/** The longest a close waits for the entry's deletion. */
export const STOP_WAIT_MS = 1000;
/** A hash outlives three missed heartbeats. */
export const HEARTBEAT_TTL_MS = 3 * HEARTBEAT_MS;

export class InstanceRegistration {
  readonly #redis: RegistryRedis;
  readonly #kind: InstanceKind;
  readonly #info: () => InstanceInfo;
  readonly #heartbeatMs: number;
  readonly #started = Date.now();
  #timer: NodeJS.Timeout | undefined;
  #last: Promise<void> = Promise.resolve();

  constructor(
    redis: RegistryRedis,
    kind: InstanceKind,
    info: () => InstanceInfo,
    heartbeatMs = HEARTBEAT_MS,
  ) {
    this.#redis = redis;
    this.#kind = kind;
    this.#info = info;
    this.#heartbeatMs = heartbeatMs;
  }

  /** Writes the entry now and every heartbeat until {@link stop}. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#beat();
    this.#timer = setInterval(() => this.#beat(), this.#heartbeatMs);
    this.#timer.unref();
  }

  /**
   * Stops the heartbeat and deletes the entry: best effort, and never longer than `STOP_WAIT_MS` (a
   * Redis that does not answer must not hold a close up; the entry then ages out).
   */
  async stop(): Promise<void> {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    const id = this.#info().id;
    const remove = this.#last
      .then(() => Promise.all([this.#redis.del(instanceKey(id)), this.#redis.zrem(INSTANCE_INDEX_KEY, id)]))
      .catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, STOP_WAIT_MS);
    });
    await Promise.race([remove, bound]);
    clearTimeout(timer);
  }

  #beat(): void {
    this.#last = this.#last.then(() => this.#write()).catch(() => undefined);
  }

  async #write(): Promise<void> {
    const i = this.#info();
    const ttl = this.#heartbeatMs * 3;
    const key = instanceKey(i.id);
    const fields: Record<string, string> = {
      id: i.id,
      kind: this.#kind,
      version: VERSION,
      host: hostname(),
      pid: String(process.pid),
      started: String(this.#started),
      seen: String(Date.now()),
    };
    if (i.group !== undefined) fields.group = i.group;
    if (i.module !== undefined) fields.module = i.module;
    if (i.mode !== undefined) fields.mode = i.mode;
    if (processFacts.metrics !== undefined) fields.metrics = processFacts.metrics;
    if (i.partitions !== undefined)
      fields.partitions = JSON.stringify(
        i.partitions.map((p) => ({ topic: p.topic, partition: p.partition, epoch: p.epoch })),
      );
    await this.#redis.hset(key, fields);
    await this.#redis.pexpire(key, ttl);
    await this.#redis.zadd(INSTANCE_INDEX_KEY, Date.now() + ttl, i.id);
    // entries of instances that stopped without deleting theirs age out of the index here
    await this.#redis.zremrangebyscore(INSTANCE_INDEX_KEY, '-inf', Date.now());
  }
}

/** A registration for a runtime's lifecycle, or undefined when it has no Redis. */
export function instanceRegistration(
  redis: RegistryRedis | undefined,
  kind: InstanceKind,
  info: () => InstanceInfo,
): InstanceRegistration | undefined {
  return redis === undefined ? undefined : new InstanceRegistration(redis, kind, info);
}
