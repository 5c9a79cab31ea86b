/**
 * The console's view registry: a view is an id, a title, a route and a render function. A new store
 * kind (the streams DSL's windows and tables) is a new view in `views/index.ts`, not a new page: the
 * server, the layout, the navigation and the security rules are shared.
 *
 * ```ts
 * const windows: ConsoleView = {
 *   id: 'windows', title: 'Windows', route: '/windows',
 *   render: async (ctx, q) => html`<h1>Windows</h1>...`,
 * };
 * ```
 */
import type { Cluster, Redis } from 'ioredis';
import type { DlqPager } from './dlq-page.js';
import type { Html } from './html.js';
import type { RegistryReader } from './instances.js';
import type { LagHistory } from './lag-history.js';
import type { PrometheusSource } from './prometheus.js';
import type { MetricsScrapes } from './scrape.js';

/** What an outbox view reads (PostgreSQL only when the console was given --database-url). */
export interface OutboxSource {
  status(): Promise<import('../outbox/admin.js').OutboxStatus>;
  /** Pending and parked rows per aggregate type. */
  byType(): Promise<import('../outbox/admin.js').AggregateTypeCounts[]>;
  /** Puts the given parked rows back to pending (`redfence outbox retry`); returns how many changed. */
  retry(ids: readonly string[]): Promise<number>;
}

/** Everything a view may use; built once by the server. */
export interface ViewContext {
  readonly redis: Redis | Cluster;
  readonly fenceMode: 'strict' | 'cluster';
  readonly lag: LagHistory;
  /** The registry as the Instances view reads it (bounded; the last rows kept for when Redis is down). */
  readonly registry: RegistryReader;
  /** The Prometheus evaluating the alert rules (`--prometheus`); undefined: not given. */
  readonly prometheus: PrometheusSource | undefined;
  readonly dlq: DlqPager;
  readonly dlqTopics: readonly string[];
  readonly outbox: OutboxSource | undefined;
  /** The instances' metrics, scraped when the Processing view is read. */
  readonly scrapes: MetricsScrapes;
  /** Record keys and values shown (`--show-values`); masked otherwise. */
  readonly showValues: boolean;
  /** Actions enabled (`--allow-actions` with a token). */
  readonly actions: boolean;
  /** The path the console is served under: "" on its own server, e.g. "/console" on a metrics server. */
  readonly base: string;
}

export interface ConsoleView {
  readonly id: string;
  readonly title: string;
  /** The GET route, e.g. `/lag`. */
  readonly route: string;
  render(ctx: ViewContext, query: URLSearchParams): Promise<Html>;
}
