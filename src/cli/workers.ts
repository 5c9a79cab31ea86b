/**
 * `redfence run <module> --workers <n>`: one instance on n cores. This process (the supervisor) has
 * checked every option and loaded the module; it forks n workers, each the same CLI entry with the same
 * arguments (node:child_process fork, an IPC channel each), marked in their environment as worker
 * `<i>/<n>/<instance>`. Worker i runs one Processor in the same consumer group with instance id
 * `<instance>-<i>` (so its transactional id and its static group.instance.id are its own) and, with
 * --metrics-port p, serves its metrics on p + i. The group's assignment shares the partitions out.
 *
 * Rules (docs/architecture.md, "More cores"):
 * - SIGTERM/SIGINT: forwarded to every worker; the supervisor exits once all have exited: 0 when each
 *   closed cleanly, 1 when one did not or --shutdown-timeout passed (the rest are SIGKILLed then). A
 *   second signal SIGKILLs the workers and exits 130 at once.
 * - A worker that exits without being asked to (a crash, SIGKILL, the OOM killer, a failed start):
 *   logged, the others are stopped as on SIGTERM, and the supervisor exits non-zero (2 when the worker
 *   exited 2: a usage error such as a missing topic, else 1). No restart in place: the supervisor that
 *   manages this process (systemd, Kubernetes) restarts the whole instance with its own backoff, and a
 *   crash loop stays visible to it.
 * - Workers' stderr is relayed line by line (whole lines, never interleaved); their JSON lines carry
 *   `instance: <instance>-<i>` and `worker: i`, other lines are prefixed `worker <i>: `.
 * - A worker whose supervisor dies (its IPC channel closes) shuts down as on SIGTERM.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from '../index.js';

/** Set by the supervisor in each worker's environment: `<index>/<count>/<instance>`. */
export const WORKER_ENV = 'REDFENCE_WORKER_OF';

export interface WorkerRole {
  index: number;
  count: number;
  /** The instance id the supervisor was given (or chose); the worker's is `<base>-<index>`. */
  base: string;
}

/** This process's role when a supervisor forked it (an IPC channel and WORKER_ENV), else undefined. */
export function workerRole(env: NodeJS.ProcessEnv = process.env): WorkerRole | undefined {
  const m = /^(\d+)\/(\d+)\/([A-Za-z0-9._-]+)$/.exec(env[WORKER_ENV] ?? '');
  if (!m || typeof process.send !== 'function') return undefined;
  return { index: Number(m[1]), count: Number(m[2]), base: m[3] as string };
}

interface Started {
  type: 'started';
  partitions: number;
}
const isStarted = (m: unknown): m is Started =>
  typeof m === 'object' && m !== null && (m as Started).type === 'started';

/** In a worker: tells the supervisor the processor started and how many input partitions it saw. */
export function workerStarted(partitions: number): void {
  process.send?.({ type: 'started', partitions } satisfies Started);
}

/**
 * In a worker: `onGone` runs when the supervisor's IPC channel closes (it died); a stderr whose reader
 * died no longer throws. The returned release() detaches and closes the channel (so the worker can
 * exit once its run is over).
 */
export function watchSupervisor(onGone: () => void): () => void {
  process.stderr.on('error', () => undefined);
  process.on('disconnect', onGone);
  return () => {
    process.off('disconnect', onGone);
    if (process.connected) process.disconnect();
  };
}

export interface SupervisorOptions {
  count: number;
  instance: string;
  /** The arguments of `redfence run`, as given (the workers parse them again). */
  args: readonly string[];
  /** The CLI entry the workers run (default: this process's script). */
  entry?: string;
  shutdownTimeoutMs: number;
  logger: Logger;
}

interface Worker {
  index: number;
  proc: ChildProcess;
  started: boolean;
  exited: boolean;
  closed: boolean;
}

/** Forks the workers and supervises them by the rules above; resolves with the exit status. */
export function superviseWorkers(o: SupervisorOptions): Promise<number> {
  const log = o.logger;
  const entry = o.entry ?? (process.argv[1] as string);
  return new Promise<number>((resolve) => {
    const workers: Worker[] = [];
    let stopping: 'signal' | 'failure' | undefined;
    let status = 0;
    let signals = 0;
    let warnedIdle = false;
    let deadline: NodeJS.Timeout | undefined;
    const alive = () => workers.filter((w) => !w.exited);

    const stop = (why: 'signal' | 'failure', sig: NodeJS.Signals) => {
      if (stopping !== undefined) return;
      stopping = why;
      for (const w of alive()) w.proc.kill(sig);
      deadline = setTimeout(() => {
        const left = alive();
        log.error(
          { deadline: o.shutdownTimeoutMs, workers: left.map((w) => w.index) },
          'graceful shutdown timed out: killing the workers still running',
        );
        status = 1;
        for (const w of left) w.proc.kill('SIGKILL');
      }, o.shutdownTimeoutMs);
    };
    const onSignal = (sig: NodeJS.Signals) => {
      signals++;
      if (signals > 1) {
        log.error(
          { signal: sig, workers: alive().map((w) => w.index) },
          'second signal: killing the workers',
        );
        for (const w of alive()) w.proc.kill('SIGKILL');
        process.exit(130);
      }
      log.info({ signal: sig, workers: alive().length }, 'shutting down: signal forwarded to the workers');
      stop('signal', sig);
    };
    const onTerm = () => onSignal('SIGTERM');
    const onInt = () => onSignal('SIGINT');
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);

    const finish = () => {
      if (!workers.every((w) => w.closed)) return;
      clearTimeout(deadline);
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      log.info({ status }, 'all workers exited');
      resolve(status);
    };

    const onExit = (w: Worker, code: number | null, signal: NodeJS.Signals | null) => {
      if (w.exited) return;
      w.exited = true;
      const facts = { worker: w.index, pid: w.proc.pid, code, signal };
      if (stopping === undefined) {
        log.error(facts, 'worker exited unexpectedly: stopping the other workers');
        status = code === 2 ? 2 : 1;
        stop('failure', 'SIGTERM');
      } else {
        if (code !== 0 && status === 0) status = 1;
        log.info(facts, 'worker exited');
      }
    };

    for (let index = 0; index < o.count; index++) {
      const proc = fork(entry, ['run', ...o.args], {
        env: { ...process.env, [WORKER_ENV]: `${index}/${o.count}/${o.instance}` },
        stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
        execArgv: process.execArgv,
      });
      const w: Worker = { index, proc, started: false, exited: false, closed: false };
      workers.push(w);
      log.info({ worker: index, pid: proc.pid, instance: `${o.instance}-${index}` }, 'worker forked');
      if (proc.stderr)
        createInterface({ input: proc.stderr, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => {
          process.stderr.write(line.startsWith('{') ? `${line}\n` : `worker ${index}: ${line}\n`);
        });
      proc.on('message', (m: unknown) => {
        if (!isStarted(m) || w.started) return;
        w.started = true;
        if (!warnedIdle && m.partitions > 0 && o.count > m.partitions) {
          warnedIdle = true;
          log.warn(
            { workers: o.count, partitions: m.partitions },
            'more workers than input partitions: some workers will be idle',
          );
        }
        if (workers.every((x) => x.started))
          log.info({ workers: o.count, partitions: m.partitions }, 'workers started');
      });
      proc.on('exit', (code, signal) => onExit(w, code, signal));
      proc.on('error', (err) => {
        log.error({ worker: index, err: err.message }, 'worker process error');
        if (proc.pid === undefined) {
          onExit(w, null, null);
          w.closed = true;
          finish();
        }
      });
      proc.on('close', () => {
        w.closed = true;
        finish();
      });
    }
  });
}
