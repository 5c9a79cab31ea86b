/**
 * The console's lag: one {@link LagSampler} per consumer group (the groups given with `--group` and
 * those registered instances name), sampled every `intervalMs` in the background, evaluated by the same
 * rules as `redfence lag` (src/metrics/lag.ts) over the last `window` samples, with a bounded history
 * (`history` points per group and topic: the total lag) for the trend graph. A page refresh reads
 * what is kept here: it never calls Kafka.
 */
import { RedfenceError } from '../errors/index.js';
import { evaluateLag, type LagEvaluation, type LagSample, worstStatus } from '../metrics/lag.js';
import { LagSampler } from '../ops/lag-sampler.js';

const NO_OFFSETS = 'no committed offsets yet';

export interface LagHistoryOptions {
  /** librdkafka properties (bootstrap.servers, security, pass-through). */
  properties: Record<string, unknown>;
  groups: readonly string[];
  /** More groups, found at each tick (the registered instances' groups). */
  discover?: () => Promise<readonly string[]>;
  intervalMs: number;
  /** Samples each status is evaluated over (as `redfence lag --samples`). */
  window: number;
  /** Points kept per group and topic for the trend graph. */
  history: number;
  slowLag: number;
  readCommitted?: boolean;
}

export interface PartitionRow extends LagEvaluation {
  topic: string;
  partition: number;
}

export interface GroupLag {
  group: string;
  status: string;
  at: number | undefined;
  error: string | undefined;
  partitions: PartitionRow[];
  /** topic -> [at, total lag] points, oldest first. */
  trend: Map<string, Array<[number, number]>>;
}

interface GroupState {
  sampler: LagSampler;
  windows: Map<string, { topic: string; partition: number; window: LagSample[] }>;
  trend: Map<string, Array<[number, number]>>;
  at: number | undefined;
  error: string | undefined;
}

export class LagHistory {
  readonly #o: LagHistoryOptions;
  readonly #groups = new Map<string, GroupState>();
  /** The groups given: kept when no instance names them. */
  readonly #given: ReadonlySet<string>;
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> = Promise.resolve();
  #closed = false;

  constructor(o: LagHistoryOptions) {
    this.#o = o;
    this.#given = new Set(o.groups);
    for (const g of o.groups) this.#add(g);
  }

  /** Samples now and then every interval until {@link close}. */
  start(): void {
    this.#schedule(0);
  }

  /** Resolves after the sampling pass in progress (or a new one) has finished. */
  async sampled(): Promise<void> {
    await this.#tick;
  }

  /** Takes one pass now (tests and the first page). */
  refresh(): Promise<void> {
    this.#tick = this.#tick.then(() => this.#pass()).catch(() => undefined);
    return this.#tick;
  }

  groups(): GroupLag[] {
    return [...this.#groups.entries()]
      .sort((a, b) => a[0].localeCompare(b[0]))
      .map(([group, s]) => {
        const now = Date.now();
        const partitions = [...s.windows.values()]
          .map((w) => ({
            topic: w.topic,
            partition: w.partition,
            ...evaluateLag(w.window, { slowLag: this.#o.slowLag }, now),
          }))
          .sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition);
        const status =
          s.error !== undefined
            ? 'ERR'
            : partitions.length === 0
              ? '-'
              : worstStatus(partitions.map((p) => p.status));
        return { group, status, at: s.at, error: s.error, partitions, trend: s.trend };
      });
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#tick;
    await Promise.all([...this.#groups.values()].map((g) => g.sampler.close().catch(() => undefined)));
  }

  #add(group: string): void {
    if (this.#groups.has(group)) return;
    const sampler = new LagSampler({
      properties: this.#o.properties,
      group,
      readCommitted: this.#o.readCommitted !== false,
    });
    this.#groups.set(group, {
      sampler,
      windows: new Map(),
      trend: new Map(),
      at: undefined,
      error: undefined,
    });
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.refresh().then(() => this.#schedule(this.#o.intervalMs));
    }, ms);
    this.#timer.unref();
  }

  async #pass(): Promise<void> {
    if (this.#closed) return;
    const found = await this.#o.discover?.().catch(() => undefined);
    if (found !== undefined) {
      const named = new Set(found);
      for (const g of named) this.#add(g);
      // a group only instances named goes with its last instance
      for (const [g, s] of this.#groups)
        if (!named.has(g) && !this.#given.has(g)) {
          this.#groups.delete(g);
          await s.sampler.close().catch(() => undefined);
        }
    }
    for (const s of this.#groups.values()) {
      if (this.#closed) return;
      await this.#sampleGroup(s);
    }
  }

  async #sampleGroup(s: GroupState): Promise<void> {
    let samples: Awaited<ReturnType<LagSampler['sample']>>;
    try {
      samples = await s.sampler.sample();
    } catch (err) {
      s.error = RedfenceError.is(err, 'RF_INVALID_OPTIONS')
        ? NO_OFFSETS
        : String((err as Error)?.message ?? err);
      return;
    }
    s.error = undefined;
    const at = Date.now();
    s.at = at;
    const totals = new Map<string, number>();
    for (const p of samples) {
      const k = `${p.topic}:${p.partition}`;
      const w = s.windows.get(k) ?? { topic: p.topic, partition: p.partition, window: [] };
      s.windows.set(k, w);
      w.window.push(p.sample);
      if (w.window.length > this.#o.window) w.window.shift();
      const { committed, end } = p.sample;
      const lag = committed === undefined || end === undefined ? 0 : Math.max(0, end - committed);
      totals.set(p.topic, (totals.get(p.topic) ?? 0) + lag);
    }
    for (const [topic, total] of totals) {
      const points = s.trend.get(topic) ?? [];
      s.trend.set(topic, points);
      points.push([at, total]);
      if (points.length > this.#o.history) points.shift();
    }
  }
}
