/**
 * Processor instances as child processes: `node --import tsx src/cli/bin.ts run examples/customer-totals.ts`
 * with the run's topics, store, group and an instance id, JSON logs on stderr parsed into lines the
 * harness can wait for, /metrics scraped for verdict counts. Every child started here is tracked and
 * SIGKILLed when the harness ends (or the process exits).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProcessingMode } from '../processor/options.js';

/** The repository root (this file is src/chaos/ or dist/chaos/). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export type Mode = ProcessingMode;

export interface LogLine {
  level?: string;
  msg?: string;
  [field: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface InstanceOptions {
  id: string;
  /** Which start of this id (0, 1, ...): names its log. */
  generation: number;
  mode: Mode;
  brokers: string[];
  redisUrl: string;
  orders: string;
  totals: string;
  store: string;
  group: string;
  sessionTimeoutMs: number;
  /** Extra environment (the crash-point variables). */
  env?: Record<string, string>;
  /** Keep this many log lines (the rest are only counted). */
  keepLines?: number;
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

const live = new Set<Instance>();

/** Polls `check` every `everyMs` until it is true; throws naming `what` after the timeout. */
export async function pollUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Sums of `redfence_verdicts_total` by verdict and `redfence_dlq_records_total` by reason. */
export interface Scrape {
  verdicts: Map<string, number>;
  deadLetters: Map<string, number>;
}

export function parseMetrics(text: string): Scrape {
  const verdicts = new Map<string, number>();
  const deadLetters = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(redfence_verdicts_total|redfence_dlq_records_total)\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = m[2] as string;
    const value = Number(m[3]);
    if (m[1] === 'redfence_verdicts_total') {
      const v = /verdict="([^"]*)"/.exec(labels)?.[1];
      if (v) verdicts.set(v, (verdicts.get(v) ?? 0) + value);
    } else {
      const r = /reason="([^"]*)"/.exec(labels)?.[1];
      if (r) deadLetters.set(r, (deadLetters.get(r) ?? 0) + value);
    }
  }
  return { verdicts, deadLetters };
}

export class Instance {
  readonly id: string;
  readonly name: string;
  readonly metricsPort: number;
  readonly proc: ChildProcess;
  readonly exited: Promise<Exit>;
  readonly lines: LogLine[] = [];
  readonly other: string[] = [];
  /** Lines logged so far (also those not kept). */
  count = 0;
  exit: Exit | undefined;
  stopped = false;
  /** The last successful scrape of /metrics. */
  lastScrape: Scrape | undefined;
  readonly #keep: number;
  #buf = '';
  #waiters = new Set<{ pred: (l: LogLine) => boolean; resolve: () => void }>();

  constructor(name: string, id: string, proc: ChildProcess, metricsPort: number, keep: number) {
    this.name = name;
    this.id = id;
    this.proc = proc;
    this.metricsPort = metricsPort;
    this.#keep = keep;
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (chunk: string) => this.#onData(chunk));
    proc.stdout?.resume();
    this.exited = new Promise<Exit>((res) => {
      proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        live.delete(this);
        res(this.exit);
      });
    });
    live.add(this);
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  #onData(chunk: string): void {
    this.#buf += chunk;
    for (let i = this.#buf.indexOf('\n'); i >= 0; i = this.#buf.indexOf('\n')) {
      const text = this.#buf.slice(0, i);
      this.#buf = this.#buf.slice(i + 1);
      if (text.trim() === '') continue;
      let line: LogLine | undefined;
      try {
        const v = JSON.parse(text) as unknown;
        if (v && typeof v === 'object' && 'level' in v) line = v as LogLine;
      } catch {
        // not a log line
      }
      if (!line) {
        this.other.push(text);
        if (this.other.length > 50) this.other.shift();
        continue;
      }
      this.count++;
      this.lines.push(line);
      if (this.lines.length > this.#keep) this.lines.shift();
      for (const w of [...this.#waiters]) {
        if (w.pred(line)) {
          this.#waiters.delete(w);
          w.resolve();
        }
      }
    }
  }

  /** True once a line matching `pred` has been logged since `sinceCount` (a value of `count`). */
  seen(pred: (l: LogLine) => boolean, sinceCount = 0): boolean {
    const skip = Math.max(0, this.lines.length - (this.count - sinceCount));
    return this.lines.slice(skip).some(pred);
  }

  /** Waits for a line matching `pred` logged after `sinceCount`; rejects on exit or timeout. */
  async waitFor(what: string, pred: (l: LogLine) => boolean, timeoutMs: number, sinceCount = 0) {
    if (this.seen(pred, sinceCount)) return;
    if (!this.alive) throw new Error(`${this.name} exited ${JSON.stringify(this.exit)} before ${what}`);
    let timer: NodeJS.Timeout | undefined;
    let waiter: { pred: (l: LogLine) => boolean; resolve: () => void } | undefined;
    try {
      await Promise.race([
        new Promise<void>((resolve) => {
          waiter = { pred, resolve };
          this.#waiters.add(waiter);
        }),
        this.exited.then((e) => {
          throw new Error(`${this.name} exited ${JSON.stringify(e)} before ${what}${this.tail()}`);
        }),
        new Promise<never>((_, rej) => {
          timer = setTimeout(
            () =>
              rej(
                new Error(`${this.name}: timed out after ${timeoutMs} ms waiting for ${what}${this.tail()}`),
              ),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (waiter) this.#waiters.delete(waiter);
    }
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
    if (this.alive) this.proc.kill(sig);
    if (sig === 'SIGSTOP') this.stopped = true;
    if (sig === 'SIGCONT') this.stopped = false;
  }

  async kill(): Promise<Exit> {
    this.signal('SIGKILL');
    return this.exited;
  }

  /** The exit, or a rejection after `timeoutMs`. */
  async waitExit(timeoutMs: number): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      this.exited,
      new Promise<never>((_, rej) => {
        timer = setTimeout(
          () => rej(new Error(`${this.name} did not exit within ${timeoutMs} ms${this.tail()}`)),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  tail(n = 12): string {
    const lines = this.lines.slice(-n).map((l) => JSON.stringify(l));
    const other = this.other.slice(-5);
    return (
      `\n--- ${this.name} log tail ---\n${lines.join('\n')}` +
      (other.length > 0 ? `\n--- other stderr ---\n${other.join('\n')}` : '')
    );
  }
}

/** The CLI entry the children run: src/cli/bin.ts through tsx (the processor module is TypeScript). */
function cliEntry(): string {
  const src = resolve(ROOT, 'src/cli/bin.ts');
  return existsSync(src) ? src : resolve(ROOT, 'dist/cli/bin.js');
}

export async function startInstance(o: InstanceOptions): Promise<Instance> {
  const metricsPort = await freePort();
  const args = [
    '--import',
    'tsx',
    cliEntry(),
    'run',
    'examples/customer-totals.ts',
    '--brokers',
    o.brokers.join(','),
    '--redis',
    o.redisUrl,
    '--mode',
    o.mode,
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
  ];
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      ORDERS_TOPIC: o.orders,
      TOTALS_TOPIC: o.totals,
      TOTALS_STORE: o.store,
      REDFENCE_CRASH_AT: '',
      REDFENCE_CRASH_AFTER: '',
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Instance(`${o.id}#${o.generation}`, o.id, proc, metricsPort, o.keepLines ?? 400);
}

/** SIGKILLs every instance still alive (stopped ones too). */
export async function killAllInstances(): Promise<void> {
  await Promise.all([...live].map((i) => i.kill()));
}

process.on('exit', () => {
  for (const i of live) i.proc.kill('SIGKILL');
});
