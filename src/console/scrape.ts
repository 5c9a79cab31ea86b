/**
 * The console's scrapes of the registered instances' metrics servers (the address each one writes to
 * the registry, src/runtime/registry.ts): every instance at once, each bounded by `timeoutMs` (one that
 * does not answer is shown as such and never holds the page longer), `GET http://<address>/metrics`
 * read up to 8 MB, only the default-prefixed `redfence_` families the Processing and Topology views
 * show kept.
 * Rates need two scrapes: the console keeps per instance an anchor scrape, replaced only by a scrape at
 * least `minGapMs` later (which then takes the rates over it), and the anchor before it, which the rates
 * of scrapes in between are over (instances gone from the registry are forgotten, at most
 * `maxInstances` kept).
 *
 * ```ts
 * const scrapes = new MetricsScrapes({ timeoutMs: 2000 });
 * const rows = await scrapes.read(await liveInstances(redis)); // rows[i].figures.rates.get('APPLY')
 * ```
 */
import { Verdict } from '../fence/types.js';
import { boundedText } from './http-read.js';
import type { InstanceRow } from './instances.js';
import {
  type Buckets,
  bucketDelta,
  bucketsOf,
  type MetricSample,
  parseMetrics,
  quantile,
} from './prom-text.js';
import {
  type NodeCounts,
  type NodeFigures,
  nodeCounts,
  nodeFigures,
  TOPOLOGY_FAMILIES,
} from './topology-figures.js';

const P = 'redfence_';
const MAX_BODY = 8 * 1024 * 1024;
/** `host:port` or `[v6]:port`: the only addresses scraped (the path is always /metrics). */
const ADDRESS = /^([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):\d{1,5}$/;
/** The rates shown: the fence's verdicts of records processed (CONFLICT is retried, REJECT dead-lettered), then dead letters. */
export const RATE_COLUMNS = [
  Verdict.APPLY,
  Verdict.SKIP,
  Verdict.REEMIT,
  Verdict.REBASE,
  Verdict.FENCE,
  'DLQ',
] as const;

const GAUGES = {
  inFlight: `${P}handler_in_flight_records`,
  retryWaiting: `${P}handler_retry_waiting_records`,
  outboxPending: `${P}outbox_pending_rows`,
  outboxParked: `${P}outbox_parked_rows`,
  outboxOldestSeconds: `${P}outbox_oldest_pending_age_seconds`,
} as const;
const KEPT = new Set<string>([
  `${P}verdicts_total`,
  `${P}dlq_records_total`,
  `${P}redis_command_duration_seconds_bucket`,
  `${P}batch_records_bucket`,
  `${P}batch_records_sum`,
  `${P}batch_records_count`,
  `${P}handler_retry_oldest_due_seconds`,
  ...Object.values(GAUGES),
  ...Object.values(TOPOLOGY_FAMILIES),
]);

/** What one scrape says, summed over topics, partitions and commands. */
export interface Snapshot {
  at: number;
  counters: Map<string, number>;
  redis: Buckets;
  batch: Buckets;
  batchSum: number;
  batchCount: number;
  /**
   * Gauges the instance exposes (absent: the instance has no such metric); `retryOldestDueSeconds` is
   * the earliest due time (epoch seconds) of a record held by the retry topic.
   */
  gauges: Partial<Record<keyof typeof GAUGES | 'retryOldestDueSeconds', number>>;
  /** A topology's nodes (topology-figures.ts), by application and node; empty for other runtimes. */
  nodes: Map<string, NodeCounts>;
}

export function snapshotOf(samples: readonly MetricSample[], at: number): Snapshot {
  const counters = new Map<string, number>();
  const sum = (name: string) =>
    samples
      .filter((s) => s.name === name)
      .reduce((a, s) => (a ?? 0) + s.value, undefined as number | undefined);
  for (const s of samples) {
    const key =
      s.name === `${P}verdicts_total`
        ? s.labels.verdict
        : s.name === `${P}dlq_records_total`
          ? 'DLQ'
          : undefined;
    if (key !== undefined) counters.set(key, (counters.get(key) ?? 0) + s.value);
  }
  const gauges: Snapshot['gauges'] = {};
  for (const [k, name] of Object.entries(GAUGES)) {
    const v = sum(name);
    if (v !== undefined) gauges[k as keyof typeof GAUGES] = v;
  }
  // epoch seconds of each retry partition's first held record (0: none waits): the earliest of them
  const due = samples
    .filter((s) => s.name === `${P}handler_retry_oldest_due_seconds` && s.value > 0)
    .map((s) => s.value);
  if (due.length > 0) gauges.retryOldestDueSeconds = Math.min(...due);
  return {
    at,
    counters,
    redis: bucketsOf(samples, `${P}redis_command_duration_seconds`),
    batch: bucketsOf(samples, `${P}batch_records`),
    batchSum: sum(`${P}batch_records_sum`) ?? 0,
    batchCount: sum(`${P}batch_records_count`) ?? 0,
    gauges,
    nodes: nodeCounts(samples),
  };
}

/** The Processing view's figures of one instance: rates between two scrapes, the rest from the latest. */
export interface Figures {
  /** Seconds between the two scrapes the rates and the interval figures are over; null: one scrape yet. */
  seconds: number | null;
  /** Per second, by verdict (and DLQ); empty with one scrape. */
  rates: Map<string, number>;
  /** Seconds; over the interval, or since the process started with one scrape. */
  redisP99: number | null;
  batchMean: number | null;
  batchP99: number | null;
  gauges: Snapshot['gauges'];
  /** A topology's nodes, with rates over the same interval (the Topology view). */
  nodes: NodeFigures[];
}

export function figures(now: Snapshot, before: Snapshot | undefined): Figures {
  const seconds = before === undefined ? null : (now.at - before.at) / 1000;
  const rates = new Map<string, number>();
  if (before !== undefined && seconds !== null && seconds > 0)
    for (const [k, n] of now.counters) {
      const d = n - (before.counters.get(k) ?? 0);
      if (d >= 0) rates.set(k, d / seconds);
    }
  const batches = now.batchCount - (before?.batchCount ?? 0);
  return {
    seconds,
    rates,
    redisP99: quantile(0.99, bucketDelta(now.redis, before?.redis)),
    batchMean: batches > 0 ? (now.batchSum - (before?.batchSum ?? 0)) / batches : null,
    batchP99: quantile(0.99, bucketDelta(now.batch, before?.batch)),
    gauges: now.gauges,
    nodes: nodeFigures(now.nodes, before?.nodes, seconds),
  };
}

/** An instance's readiness (its /readyz); `ready` undefined when it could not be read (`problem`). */
export interface InstanceHealth {
  ready: boolean | undefined;
  /** The parts not ready (kafka, redis, scripts, group, ...). */
  notReady: string[];
  problem: string | undefined;
}

export interface ProcessingRow {
  instance: InstanceRow;
  /** Why there are no figures: no address registered, no answer, a bad answer. */
  problem: string | undefined;
  figures: Figures | undefined;
}

interface Kept {
  /** The scrape the rates are over (at least minGapMs before the anchor); none yet: no rates. */
  before: Snapshot | undefined;
  /** The latest scrape at least minGapMs after `before`. */
  anchor: Snapshot;
}

export interface ScrapeOptions {
  /** The longest one scrape may take. Default 2000 ms. */
  timeoutMs?: number;
  /** The least time between the two scrapes rates are taken over. Default 1000 ms. */
  minGapMs?: number;
  /** Instances kept. Default 1000. */
  maxInstances?: number;
}

export class MetricsScrapes {
  readonly #timeoutMs: number;
  readonly #minGapMs: number;
  readonly #max: number;
  readonly #kept = new Map<string, Kept>();

  constructor(o: ScrapeOptions = {}) {
    this.#timeoutMs = o.timeoutMs ?? 2000;
    this.#minGapMs = o.minGapMs ?? 1000;
    this.#max = o.maxInstances ?? 1000;
  }

  /** Scrapes every instance at once; resolves within about `timeoutMs` whatever they do. */
  async read(instances: readonly InstanceRow[]): Promise<ProcessingRow[]> {
    const live = new Set(instances.map((i) => i.id));
    for (const id of this.#kept.keys()) if (!live.has(id)) this.#kept.delete(id);
    return Promise.all(instances.map((i) => this.#one(i)));
  }

  async #one(instance: InstanceRow): Promise<ProcessingRow> {
    const address = instance.metrics;
    if (address === undefined)
      return { instance, problem: 'no metrics address registered', figures: undefined };
    if (!ADDRESS.test(address))
      return { instance, problem: 'registered metrics address not host:port', figures: undefined };
    let samples: MetricSample[];
    try {
      samples = parseMetrics(await this.#fetch(address), (n) => KEPT.has(n));
    } catch (err) {
      return { instance, problem: (err as Error).message, figures: undefined };
    }
    const now = snapshotOf(samples, Date.now());
    const kept = this.#kept.get(instance.id);
    // the anchor stays until it is at least minGapMs old, then the rates are over it and this scrape
    // anchors the next ones: scrapes closer together (a page read twice a second) never move it, so
    // rates come within minGapMs however often the page is read
    if (kept === undefined) {
      if (this.#kept.size < this.#max) this.#kept.set(instance.id, { before: undefined, anchor: now });
      return { instance, problem: undefined, figures: figures(now, undefined) };
    }
    if (now.at - kept.anchor.at >= this.#minGapMs) {
      kept.before = kept.anchor;
      kept.anchor = now;
    }
    return { instance, problem: undefined, figures: figures(now, kept.before) };
  }

  /**
   * Each instance's readiness from its metrics server's /readyz (200 ready, 503 not, with the parts as
   * JSON), all at once, each bounded by the scrape timeout.
   */
  async health(instances: readonly InstanceRow[]): Promise<Map<string, InstanceHealth>> {
    const one = async (i: InstanceRow): Promise<[string, InstanceHealth]> => {
      const address = i.metrics;
      if (address === undefined || !ADDRESS.test(address))
        return [i.id, { ready: undefined, notReady: [], problem: 'no metrics address' }];
      try {
        const body = JSON.parse(await this.#fetch(address, '/readyz', [200, 503])) as {
          ready?: unknown;
          parts?: Record<string, unknown>;
        };
        const notReady = Object.entries(body.parts ?? {})
          .filter(([, ok]) => ok !== true)
          .map(([part]) => part);
        return [i.id, { ready: body.ready === true, notReady, problem: undefined }];
      } catch (err) {
        return [i.id, { ready: undefined, notReady: [], problem: (err as Error).message }];
      }
    };
    return new Map(await Promise.all(instances.map(one)));
  }

  async #fetch(address: string, path = '/metrics', ok: readonly number[] = [200]): Promise<string> {
    const signal = AbortSignal.timeout(this.#timeoutMs);
    try {
      const res = await fetch(`http://${address}${path}`, { signal, redirect: 'error' });
      if (!ok.includes(res.status)) {
        await res.body?.cancel();
        throw new Error(`${path.slice(1)} answered HTTP ${res.status}`);
      }
      return await boundedText(res, MAX_BODY, 'metrics answer');
    } catch (err) {
      if (signal.aborted) throw new Error(`no answer within ${this.#timeoutMs} ms`);
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      throw new Error(cause === undefined ? (err as Error).message : `no answer (${cause})`);
    }
  }
}
