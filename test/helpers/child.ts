/**
 * `redfence run examples/customer-totals.ts` as a child process for fault tests: its JSON log lines
 * (stderr) parsed and awaitable, signals (STOP/CONT/TERM/KILL) and exit awaitable. Every child started
 * here is tracked; `killLeftovers()` (register it with `afterEach`) SIGKILLs those still alive, and the
 * test process kills them on exit too.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../../src/processor/logger.js';
import { KAFKA_BROKERS, REDIS_URL } from './env.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** One parsed log line of `redfence run --log <level>`. */
export interface LogLine {
  time: string;
  level: 'debug' | 'info' | 'warn' | 'error';
  instance: string;
  msg?: string;
  [field: string]: unknown;
}

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
  redisUrl?: string;
  /** Default 'info'. */
  log?: 'debug' | 'info' | 'warn' | 'error';
  /** Extra environment for the child (e.g. the crash variables). */
  env?: Record<string, string>;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const live = new Set<ProcessorChild>();

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

interface Waiter {
  pred: (l: LogLine) => boolean;
  from: number;
  resolve: (l: LogLine) => void;
  reject: (e: Error) => void;
}

/** Log lines of one process (a child's stderr, or an in-process Logger), awaitable by predicate. */
export class LogBook {
  readonly name: string;
  readonly lines: LogLine[] = [];
  /** Set once no more lines can come (the child exited): pending and later waits reject. */
  #closed: string | undefined;
  #waiters = new Set<Waiter>();

  constructor(name: string) {
    this.name = name;
  }

  push(line: LogLine): void {
    const index = this.lines.push(line) - 1;
    for (const w of [...this.#waiters]) {
      if (index >= w.from && w.pred(line)) {
        this.#waiters.delete(w);
        w.resolve(line);
      }
    }
  }

  close(reason: string): void {
    this.#closed = reason;
    for (const w of this.#waiters) w.reject(new Error(reason));
    this.#waiters.clear();
  }

  /** A pino-style Logger writing here (for an in-process Processor). */
  logger(instance = this.name): Logger {
    const at =
      (level: LogLine['level']) =>
      (obj: object, msg?: string): void =>
        this.push({ time: new Date().toISOString(), level, instance, msg, ...obj });
    return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  }

  /** Lines matching `pred` (from index `from`). */
  find(pred: (l: LogLine) => boolean, from = 0): LogLine[] {
    return this.lines.slice(from).filter(pred);
  }

  /**
   * The first line (index >= `from`, already seen or still to come) matching `pred`; rejects after
   * `timeoutMs`, or when the log is closed first.
   */
  waitFor(what: string, pred: (l: LogLine) => boolean, timeoutMs = 60_000, from = 0): Promise<LogLine> {
    const seen = this.lines.slice(from).find(pred);
    if (seen) return Promise.resolve(seen);
    if (this.#closed !== undefined)
      return Promise.reject(new Error(`${this.name}: ${this.#closed} before logging ${what} ${this.tail()}`));
    return new Promise<LogLine>((res, rej) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(w);
        rej(
          new Error(`${this.name}: timed out after ${timeoutMs} ms waiting for log: ${what} ${this.tail()}`),
        );
      }, timeoutMs);
      const w: Waiter = {
        pred,
        from,
        resolve: (l) => {
          clearTimeout(timer);
          res(l);
        },
        reject: (e) => {
          clearTimeout(timer);
          rej(new Error(`${this.name}: ${e.message} before logging ${what} ${this.tail()}`));
        },
      };
      this.#waiters.add(w);
    });
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

  /** The last lines, for failure messages. */
  tail(n = 15): string {
    const lines = this.lines.slice(-n).map((l) => JSON.stringify(l));
    return lines.length === 0 ? '(no log lines)' : `\n--- ${this.name} log tail ---\n${lines.join('\n')}`;
  }
}

export class ProcessorChild {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly metricsPort: number;
  /** Every JSON log line of its stderr, in order. */
  readonly log: LogBook;
  /** stderr lines that are not JSON (stack traces, library noise). */
  readonly otherStderr: string[] = [];
  /** Resolves when the process has exited (never rejects). */
  readonly exited: Promise<Exit>;
  exit: Exit | undefined;
  #buf = '';

  constructor(name: string, proc: ChildProcess, metricsPort: number) {
    this.name = name;
    this.proc = proc;
    this.metricsPort = metricsPort;
    this.log = new LogBook(name);
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (chunk: string) => this.#onData(chunk));
    proc.stdout?.resume(); // the CLI writes nothing there; drain anyway
    this.exited = new Promise<Exit>((res) => {
      proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        live.delete(this);
        this.log.close(`exited (code ${code}, signal ${signal})`);
        res(this.exit);
      });
    });
    live.add(this);
  }

  get pid(): number {
    return this.proc.pid as number;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  #onData(chunk: string): void {
    this.#buf += chunk;
    for (let i = this.#buf.indexOf('\n'); i >= 0; i = this.#buf.indexOf('\n')) {
      const line = this.#buf.slice(0, i);
      this.#buf = this.#buf.slice(i + 1);
      if (line.trim() === '') continue;
      let parsed: LogLine | undefined;
      try {
        const v = JSON.parse(line) as unknown;
        if (v && typeof v === 'object' && 'level' in v) parsed = v as LogLine;
      } catch {
        // not a log line
      }
      if (parsed) this.log.push(parsed);
      else this.otherStderr.push(line);
    }
  }

  /** The last lines of its log and other stderr, for failure messages. */
  tail(n = 15): string {
    const other = this.otherStderr.slice(-5);
    return `${this.log.tail(n)}${other.length > 0 ? `\n--- other stderr ---\n${other.join('\n')}` : ''}`;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.alive) this.proc.kill(sig);
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

  /** SIGKILL (works on a stopped process too) and wait for the exit. */
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
          () => rej(new Error(`${this.name} did not exit within ${timeoutMs} ms ${this.tail()}`)),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
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
  ];
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      ORDERS_TOPIC: options.orders,
      TOTALS_TOPIC: options.totals,
      TOTALS_STORE: options.store,
      REDFENCE_CRASH_AT: '',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new ProcessorChild(options.instance, proc, metricsPort);
}

/** SIGKILLs every child still alive (continuing stopped ones is unnecessary: SIGKILL ends them). */
export async function killLeftovers(): Promise<void> {
  await Promise.all([...live].map((c) => c.kill()));
}

process.on('exit', () => {
  for (const c of live) c.proc.kill('SIGKILL');
});
