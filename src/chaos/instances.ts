/**
 * Processor instances as child processes: the package's own CLI running the package's own processor
 * module (customer-totals), `node <cli> run <module>` with the run's topics, store, group and an
 * instance id. From the compiled package (dist/, an npm install) that is plain node on .js files; from
 * the sources (the tests, through tsx) the same two files as .ts under tsx. JSON logs on stderr are
 * parsed into lines the harness can wait for; /metrics is scraped for verdict counts.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Child, type Exit, type LogLine } from '../harness/child.js';
import { freePort } from '../harness/port.js';
import type { ProcessingMode } from '../index.js';

export type { Exit, LogLine };
export type Mode = ProcessingMode;

const HERE = fileURLToPath(import.meta.url);
const FROM_SOURCE = HERE.endsWith('.ts');
const EXT = FROM_SOURCE ? '.ts' : '.js';
/** The package root (this file is src/chaos/ or dist/chaos/). */
const ROOT = resolve(dirname(HERE), '../..');

/**
 * How an instance is started: node's arguments before `run`, the processor module, the directory. The
 * module is customer-totals, or with `user` (a user's module) any-processor, which runs that module on
 * the run's topics and store; with `handler`, any-handler (the handler module `user`, the built-in
 * webhook handler or a user's, on the run's input and name).
 */
export function instanceCommand(
  user?: string,
  handler = false,
  topology = false,
): { node: string[]; module: string; cwd: string } {
  const cli = join(dirname(HERE), '..', 'cli', `bin${EXT}`);
  const wrapper = handler
    ? 'any-handler'
    : topology
      ? 'any-topology'
      : user === undefined
        ? 'customer-totals'
        : 'any-processor';
  return {
    node: FROM_SOURCE ? ['--import', 'tsx', cli] : [cli],
    module: join(dirname(HERE), `${wrapper}${EXT}`),
    // a user's module runs where the command was given (as with redfence run), unless `--import tsx`
    // must be found from the package's root (from the sources)
    cwd: user !== undefined && !FROM_SOURCE ? process.cwd() : ROOT,
  };
}

/** The built-in handler module of `redfence chaos --handler` (src/chaos/webhook.ts, or its .js). */
export function webhookModule(): string {
  return join(dirname(HERE), `webhook${EXT}`);
}

export interface InstanceOptions {
  id: string;
  /** Which start of this id (0, 1, ...): names its log. */
  generation: number;
  mode: Mode;
  brokers: string[];
  /** `--redis <url>`, `--cluster <seeds>` or `--sentinels <list> --sentinel-name <name>`. */
  redisArgs: readonly string[];
  /** More `redfence run` options (`--wait-replicas`). */
  runArgs?: readonly string[];
  orders: string;
  totals: string;
  store: string;
  group: string;
  sessionTimeoutMs: number;
  /** A user's processor module (absolute path) instead of customer-totals; `orders`/`totals` are its topics. */
  userModule?: string;
  /** `userModule` is a handler module (run through any-handler; no `--mode`). */
  handler?: boolean;
  /** `userModule` is a topology module (run through any-topology). */
  topology?: boolean;
  /** Extra environment (the crash-point variables). */
  env?: Record<string, string>;
  /** Keep this many log lines (the rest are only counted). */
  keepLines?: number;
}

/**
 * Sums of `redfence_verdicts_total` by verdict, `redfence_dlq_records_total` by reason and
 * `redfence_topology_ticks_total` by event.
 */
export interface Scrape {
  verdicts: Map<string, number>;
  deadLetters: Map<string, number>;
  ticks: Map<string, number>;
}

const SCRAPED = {
  redfence_verdicts_total: 'verdict',
  redfence_dlq_records_total: 'reason',
  redfence_topology_ticks_total: 'event',
} as const;

export function parseMetrics(text: string): Scrape {
  const sums = {
    redfence_verdicts_total: new Map<string, number>(),
    redfence_dlq_records_total: new Map<string, number>(),
    redfence_topology_ticks_total: new Map<string, number>(),
  };
  for (const line of text.split('\n')) {
    const m =
      /^(redfence_verdicts_total|redfence_dlq_records_total|redfence_topology_ticks_total)\{([^}]*)\}\s+(\S+)/.exec(
        line,
      );
    if (!m) continue;
    const family = m[1] as keyof typeof SCRAPED;
    const label = new RegExp(`${SCRAPED[family]}="([^"]*)"`).exec(m[2] as string)?.[1];
    const sum = sums[family];
    if (label) sum.set(label, (sum.get(label) ?? 0) + Number(m[3]));
  }
  return {
    verdicts: sums.redfence_verdicts_total,
    deadLetters: sums.redfence_dlq_records_total,
    ticks: sums.redfence_topology_ticks_total,
  };
}

/** One started process of an instance id: its child, its /metrics port, its last scrape. */
export class Instance {
  readonly id: string;
  readonly metricsPort: number;
  readonly child: Child;
  stopped = false;
  /** The last successful scrape of /metrics. */
  lastScrape: Scrape | undefined;
  /** When the harness SIGKILLed it while it ran, and when it SIGSTOPped it (ms since the epoch). */
  killedAt: number | undefined;
  stoppedAt: number | undefined;

  constructor(id: string, child: Child, metricsPort: number) {
    this.id = id;
    this.child = child;
    this.metricsPort = metricsPort;
  }

  get name(): string {
    return this.child.name;
  }
  get alive(): boolean {
    return this.child.alive;
  }
  get exit(): Exit | undefined {
    return this.child.exit;
  }
  get pid(): number {
    return this.child.pid;
  }
  /** Log lines so far: a mark for `seen` and `waitFor`. */
  get count(): number {
    return this.child.log.count;
  }

  /** True once a line matching `pred` has been logged since `sinceCount` (a value of `count`). */
  seen(pred: (l: LogLine) => boolean, sinceCount = 0): boolean {
    return this.child.log.seen(pred, sinceCount);
  }

  /** Waits for a line matching `pred` logged after `sinceCount`; rejects on exit or timeout. */
  async waitFor(what: string, pred: (l: LogLine) => boolean, timeoutMs: number, sinceCount = 0) {
    await this.child.log.waitFor(what, pred, timeoutMs, sinceCount);
  }

  /** Scrapes /metrics (kept as lastScrape); undefined when it does not answer. */
  async scrape(timeoutMs = 1000): Promise<Scrape | undefined> {
    if (!this.alive || this.stopped) return undefined;
    try {
      const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (res.status !== 200) return undefined;
      const s = parseMetrics(await res.text());
      this.lastScrape = s;
      return s;
    } catch {
      return undefined;
    }
  }

  signal(sig: NodeJS.Signals): void {
    this.child.signal(sig);
    if (sig === 'SIGSTOP') {
      this.stopped = true;
      this.stoppedAt ??= Date.now();
    }
    if (sig === 'SIGCONT') this.stopped = false;
  }

  kill(): Promise<Exit> {
    if (this.alive) this.killedAt ??= Date.now();
    return this.child.kill();
  }

  /** The exit, or a rejection after `timeoutMs`. */
  waitExit(timeoutMs: number): Promise<Exit> {
    return this.child.waitExit(timeoutMs);
  }

  tail(n = 12): string {
    return this.child.tail(n);
  }

  /**
   * The last `n` log lines and the last `n` other lines of stdout and stderr: a process that dies before
   * its logger runs (a CLI error such as RF_REDIS_UNAVAILABLE, a module that does not load) says why only
   * in the latter.
   */
  lastLines(n = 12): string {
    const output = this.child.output;
    return `${this.child.log.tail(n)}${output.count > 0 ? output.tail(n) : ''}`;
  }
}

export async function startInstance(o: InstanceOptions): Promise<Instance> {
  const metricsPort = await freePort();
  const cmd = instanceCommand(o.userModule, o.handler, o.topology);
  const name = `${o.id}#${o.generation}`;
  const child = new Child({
    name,
    command: process.execPath,
    args: [
      ...cmd.node,
      'run',
      cmd.module,
      '--brokers',
      o.brokers.join(','),
      ...o.redisArgs,
      ...(o.runArgs ?? []),
      ...(o.handler ? [] : ['--mode', o.mode]),
      '--group',
      o.group,
      '--instance',
      o.id,
      '--metrics-port',
      String(metricsPort),
      '--session-timeout',
      String(o.sessionTimeoutMs),
      '--log',
      'info',
    ],
    cwd: cmd.cwd,
    env: {
      ...process.env,
      ORDERS_TOPIC: o.orders,
      TOTALS_TOPIC: o.totals,
      TOTALS_STORE: o.store,
      REDFENCE_CHAOS_MODULE: o.userModule ?? '',
      REDFENCE_CHAOS_INPUT: o.orders,
      REDFENCE_CHAOS_OUTPUT: o.totals,
      REDFENCE_CHAOS_STORE: o.store,
      REDFENCE_CRASH_AT: '',
      REDFENCE_CRASH_AFTER: '',
      REDFENCE_CHAOS_INSTANCE: name,
      ...o.env,
    },
    keepLines: o.keepLines ?? 400,
    keepOutput: 50,
  });
  return new Instance(o.id, child, metricsPort);
}
