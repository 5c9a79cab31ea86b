/**
 * `redfence run examples/customer-totals.ts` as a child process for fault tests (the shared spawner,
 * src/harness/child.ts): its JSON log lines (stderr) parsed and awaitable, signals (STOP/CONT/TERM/KILL)
 * and exit awaitable. Every child started here is tracked; `killLeftovers()` (register it with
 * `afterEach`) SIGKILLs those still alive, and none outlives the test process.
 */
import assert from 'node:assert/strict';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Child, freePort, LogBook as HarnessLogBook, type LogLine } from '../../src/harness/index.js';
import type { Logger } from '../../src/runtime/logger.js';
import { KAFKA_BROKERS, REDIS_URL } from './env.js';
import { committedOffsets, pollUntil } from './kafka.js';

export type { Exit } from '../../src/harness/index.js';
export { freePort, type LogLine };

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface ChildOptions {
  /** Topics and store of examples/customer-totals.ts (ORDERS_TOPIC, TOTALS_TOPIC, TOTALS_STORE). */
  orders: string;
  totals: string;
  store: string;
  mode: 'exactly-once' | 'at-least-once';
  group: string;
  instance: string;
  /** Default: a free port. */
  metricsPort?: number;
  /** Default 6000 (the broker's minimum). */
  sessionTimeoutMs?: number;
  shutdownTimeoutMs?: number;
  /** --owner-cache: bytes of owner-local state; 0: off (every key read, as a test gating HGETALL needs). */
  ownerCacheBytes?: number;
  redisUrl?: string;
  /** Default 'info'. */
  log?: 'debug' | 'info' | 'warn' | 'error';
  /** Extra environment for the child (e.g. the crash variables). */
  env?: Record<string, string>;
}

const live = new Set<ProcessorChild>();

/** Log lines of a child or of an in-process Processor, awaitable by predicate. */
export class LogBook extends HarnessLogBook<LogLine> {
  /** A pino-style Logger writing here (for an in-process Processor). */
  logger(instance = this.name): Logger {
    const at =
      (level: string) =>
      (obj: object, msg?: string): void =>
        this.push({ time: new Date().toISOString(), level, instance, msg, ...obj });
    return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  }

  /** Waits for 'partitions assigned' with a non-empty list; returns the partitions. */
  async waitAssigned(timeoutMs = 60_000, from = 0): Promise<number[]> {
    const l = await this.waitFor(
      'partitions assigned (non-empty)',
      (x) => x.msg === 'partitions assigned' && Array.isArray(x.partitions) && x.partitions.length > 0,
      timeoutMs,
      from,
    );
    return l.partitions as number[];
  }
}

export class ProcessorChild extends Child {
  declare readonly log: LogBook;
  readonly metricsPort: number;

  constructor(name: string, metricsPort: number, args: string[], env: NodeJS.ProcessEnv) {
    super({ name, command: process.execPath, args, cwd: ROOT, env, log: new LogBook(name) });
    this.metricsPort = metricsPort;
    live.add(this);
    void this.exited.then(() => live.delete(this));
  }

  /** stderr lines that are not JSON (stack traces, library noise). */
  get otherStderr(): readonly string[] {
    return this.output.lines;
  }

  stop(): void {
    this.signal('SIGSTOP');
  }
  cont(): void {
    this.signal('SIGCONT');
  }
  term(): void {
    this.signal('SIGTERM');
  }

  /** Sums of `redfence_verdicts_total` by verdict, scraped from its /metrics. */
  async verdicts(): Promise<Map<string, number>> {
    const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`);
    if (res.status !== 200) throw new Error(`${this.name}: /metrics answered ${res.status}`);
    const out = new Map<string, number>();
    for (const line of (await res.text()).split('\n')) {
      const m = /^redfence_verdicts_total\{([^}]*)\}\s+(\S+)/.exec(line);
      const verdict = m ? /verdict="([^"]*)"/.exec(m[1] as string)?.[1] : undefined;
      if (m && verdict) out.set(verdict, (out.get(verdict) ?? 0) + Number(m[2]));
    }
    return out;
  }
}

/** Starts `redfence run examples/customer-totals.ts` with its own topics, group and instance id. */
export async function startProcessorChild(options: ChildOptions): Promise<ProcessorChild> {
  const metricsPort = options.metricsPort ?? (await freePort());
  const args = [
    '--import',
    'tsx',
    'src/cli/bin.ts',
    'run',
    'examples/customer-totals.ts',
    '--brokers',
    KAFKA_BROKERS,
    '--redis',
    options.redisUrl ?? REDIS_URL,
    '--mode',
    options.mode,
    '--group',
    options.group,
    '--instance',
    options.instance,
    '--metrics-port',
    String(metricsPort),
    '--session-timeout',
    String(options.sessionTimeoutMs ?? 6000),
    '--log',
    options.log ?? 'info',
    ...(options.shutdownTimeoutMs === undefined
      ? []
      : ['--shutdown-timeout', String(options.shutdownTimeoutMs)]),
    ...(options.ownerCacheBytes === undefined ? [] : ['--owner-cache', String(options.ownerCacheBytes)]),
  ];
  return new ProcessorChild(options.instance, metricsPort, args, {
    ...process.env,
    ORDERS_TOPIC: options.orders,
    TOTALS_TOPIC: options.totals,
    TOTALS_STORE: options.store,
    REDFENCE_CRASH_AT: '',
    ...options.env,
  });
}

/**
 * The instance that takes over in a crash test: once assigned, waits until `group` committed every
 * partition of `topic` to its end in `ends`, reads its verdicts from /metrics, then stops it (SIGTERM)
 * and asserts it exits 0. Returns the verdicts.
 */
export async function takesOverToTheEnd(
  b: ProcessorChild,
  group: string,
  topic: string,
  ends: ReadonlyMap<number, number>,
): Promise<Map<string, number>> {
  await b.log.waitAssigned(60_000);
  await pollUntil(
    'B committed the end offsets',
    async () => {
      if (!b.alive) throw new Error(`B exited ${JSON.stringify(b.exit)}`);
      const now = await committedOffsets(group, topic);
      return [...ends].every(([p, end]) => end === 0 || now.get(p) === end);
    },
    90_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message} ${b.tail()}`);
  });
  const v = await b.verdicts();
  b.term();
  assert.deepEqual(await b.waitExit(20_000), { code: 0, signal: null }, `B exits 0 ${b.tail()}`);
  return v;
}

/** SIGKILLs every child still alive (continuing stopped ones is unnecessary: SIGKILL ends them). */
export async function killLeftovers(): Promise<void> {
  await Promise.all([...live].map((c) => c.kill()));
}
