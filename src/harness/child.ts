/**
 * A child process for tests, benchmarks and the chaos harness: its output captured line by line (JSON
 * log lines with a `level` into `log`, everything else into `output`), readiness awaited on a line,
 * every wait bounded, kill and terminate waiting for the exit.
 *
 * While any child is alive, one `exit` listener on this process SIGKILLs the children still running, so
 * none outlives the test or run that started it; the listener is removed when the last child exits.
 * Importing this module registers nothing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { LogBook } from './log-book.js';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One JSON log line (`redfence run --log <level>` writes them to stderr). */
export interface LogLine {
  time?: string;
  level?: string;
  instance?: string;
  msg?: string;
  [field: string]: unknown;
}

export interface ChildOptions {
  /** Names the child in errors and tails. */
  name: string;
  command: string;
  args?: readonly string[];
  cwd?: string;
  /** The whole environment of the child (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Log lines held (default all; `log.count` counts them all anyway). */
  keepLines?: number;
  /** The book to write the log lines into (default a new one). */
  log?: LogBook<LogLine>;
  /** Other output lines held (default 200). */
  keepOutput?: number;
}

/** What `spawnChild` waits for before it resolves: a log line, or an output line, within a bound. */
export interface Readiness {
  label: string;
  log?: (line: LogLine) => boolean;
  output?: RegExp;
  /** Default 60 s. */
  timeoutMs?: number;
}

const live = new Set<Child>();
const reap = (): void => {
  for (const c of live) c.proc.kill('SIGKILL');
};
function track(c: Child): void {
  if (live.size === 0) process.on('exit', reap);
  live.add(c);
}
function untrack(c: Child): void {
  if (!live.delete(c)) return;
  if (live.size === 0) process.removeListener('exit', reap);
}

export class Child {
  readonly name: string;
  readonly proc: ChildProcess;
  /** JSON log lines (objects with a `level`), in order. */
  readonly log: LogBook<LogLine>;
  /** Every other line of stdout and stderr (stack traces, library noise, a server's own log). */
  readonly output: LogBook<string>;
  /** Resolves when the process has exited (never rejects). */
  readonly exited: Promise<Exit>;
  exit: Exit | undefined;
  #partial = { stdout: '', stderr: '' };

  constructor(options: ChildOptions) {
    this.name = options.name;
    this.log =
      options.log ?? new LogBook<LogLine>(options.name, options.keepLines ? { keep: options.keepLines } : {});
    this.output = new LogBook<string>(`${options.name} output`, { keep: options.keepOutput ?? 200 });
    this.proc = spawn(options.command, [...(options.args ?? [])], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of ['stdout', 'stderr'] as const) {
      this.proc[stream]?.setEncoding('utf8');
      this.proc[stream]?.on('data', (chunk: string) => this.#onData(stream, chunk));
    }
    this.exited = new Promise<Exit>((resolve) => {
      const done = (exit: Exit): void => {
        if (this.exit) return;
        this.exit = exit;
        untrack(this);
        const reason = `exited (code ${exit.code}, signal ${exit.signal})`;
        this.log.close(reason);
        this.output.close(reason);
        resolve(exit);
      };
      this.proc.once('exit', (code, signal) => done({ code, signal }));
      this.proc.once('error', (err) => {
        this.output.push(`spawn ${options.command}: ${err.message}`);
        if (this.proc.pid === undefined) done({ code: null, signal: null });
      });
    });
    track(this);
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  #onData(stream: 'stdout' | 'stderr', chunk: string): void {
    let buf = this.#partial[stream] + chunk;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const text = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (text.trim() === '') continue;
      let line: LogLine | undefined;
      if (text.startsWith('{')) {
        try {
          const v = JSON.parse(text) as unknown;
          if (v && typeof v === 'object' && 'level' in v) line = v as LogLine;
        } catch {
          // not a log line
        }
      }
      if (line) this.log.push(line);
      else this.output.push(text);
    }
    this.#partial[stream] = buf;
  }

  /** Waits for a line matching `ready`; rejects (naming it) on exit or after its timeout. */
  async ready(ready: Readiness): Promise<void> {
    const timeoutMs = ready.timeoutMs ?? 60_000;
    if (ready.log) await this.log.waitFor(ready.label, ready.log, timeoutMs);
    else if (ready.output) {
      const re = ready.output;
      await this.output.waitFor(ready.label, (l) => re.test(l), timeoutMs);
    }
  }

  signal(sig: NodeJS.Signals): void {
    if (this.alive) this.proc.kill(sig);
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
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${this.name} did not exit within ${timeoutMs} ms${this.tail()}`)),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  /**
   * SIGTERM (after a SIGCONT, in case it is stopped) and wait up to `timeoutMs` for the exit; then
   * SIGKILL. `forced` says the SIGKILL was needed.
   */
  async terminate(timeoutMs = 10_000): Promise<{ exit: Exit; forced: boolean }> {
    if (!this.alive) return { exit: this.exit as Exit, forced: false };
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    try {
      return { exit: await this.waitExit(timeoutMs), forced: false };
    } catch {
      return { exit: await this.kill(), forced: true };
    }
  }

  /** The last log lines and other output, for failure messages. */
  tail(n = 15): string {
    return `${this.log.tail(n)}${this.output.count > 0 ? this.output.tail(5) : ''}`;
  }
}

/** Starts a child and, given `ready`, waits for it (killing the child when it does not come). */
export async function spawnChild(options: ChildOptions & { ready?: Readiness }): Promise<Child> {
  const child = new Child(options);
  if (options.ready) {
    try {
      await child.ready(options.ready);
    } catch (err) {
      await child.kill();
      throw err;
    }
  }
  return child;
}

/** SIGKILLs every child still alive, waiting for their exits. */
export async function killChildren(): Promise<void> {
  await Promise.all([...live].map((c) => c.kill()));
}
