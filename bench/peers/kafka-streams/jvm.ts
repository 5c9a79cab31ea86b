/**
 * The Kafka Streams peer's JVM, shared by its own benchmark (run.ts) and bench/topology: the Maven build
 * of KafkaStreamsPeer.java (once, when its sources are newer than the last build), one child JVM per
 * instance with its events parsed, its CPU and peak RSS read from /proc, and every child killed on exit.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../../..');
/** Build output, state directories and JVM logs (git-ignored). */
export const WORK = join(ROOT, '.dev/bench/kafka-streams');
const TARGET = join(WORK, 'target');
const MAIN_CLASS = 'dev.redfence.bench.KafkaStreamsPeer';
const children = new Set<ChildProcess>();

/** SIGKILLs every JVM still running (on exit, on a signal, after a failure). */
export function killJvms(): void {
  for (const c of children) c.kill('SIGKILL');
}

// ---------------------------------------------------------------------------------------------- build

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let m = st.mtimeMs;
  for (const e of readdirSync(path)) m = Math.max(m, newestMtime(join(path, e)));
  return m;
}

export function buildPeer(): void {
  // A stamp written after a successful build (the jar plugin may leave an up-to-date jar untouched).
  const stamp = join(TARGET, '.built');
  const lib = join(TARGET, 'lib');
  const src = Math.max(newestMtime(join(HERE, 'pom.xml')), newestMtime(join(HERE, 'src')));
  if (existsSync(stamp) && existsSync(lib) && statSync(stamp).mtimeMs >= src) return;
  console.error('[ks] building the Kafka Streams app (mvn -q -B package)');
  rmSync(lib, { recursive: true, force: true });
  execFileSync('mvn', ['-q', '-B', '-f', join(HERE, 'pom.xml'), 'package'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
}

// ---------------------------------------------------------------------------------------------- the JVM

export interface Events {
  start?: number;
  /** Epoch ms of each state transition, e.g. "REBALANCING RUNNING". */
  states: Array<{ at: number; from: string; to: string }>;
  restoreStart: Array<{ at: number; tp: string; from: number; to: number }>;
  restoreEnd: Array<{ at: number; tp: string; records: number }>;
}

export interface Jvm {
  proc: ChildProcess;
  pid: number;
  events: Events;
  /** epoch ms at spawn */
  spawnedAt: number;
  exited: Promise<number | null>;
  stderrTail: () => string;
}

/** One Kafka Streams instance: its topics, application id, state directory and settings. */
export interface JvmConfig {
  input: string;
  output: string;
  appId: string;
  stateDir: string;
  threads: number;
  cache: string;
}

/** What every instance of a run shares: the broker, the JVM's options and log level, extra `KS_*` env. */
export interface JvmSettings {
  brokers: readonly string[];
  javaOpts: readonly string[];
  logLevel: string;
  env: Readonly<Record<string, string>>;
}

/** Starts the peer (KafkaStreamsPeer.java) as a child JVM; its stdout events are parsed into `events`. */
export function startJvm(c: JvmConfig, s: JvmSettings): Jvm {
  mkdirSync(c.stateDir, { recursive: true });
  mkdirSync(join(WORK, 'logs'), { recursive: true });
  // One log per instance: named after its state dir (<application.id>, or <application.id>-A / -B).
  const log = createWriteStream(join(WORK, 'logs', `${basename(c.stateDir)}.log`));
  const cp = `${join(TARGET, 'classes')}:${join(TARGET, 'lib', '*')}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...s.env,
    KS_BROKERS: s.brokers.join(','),
    KS_INPUT: c.input,
    KS_OUTPUT: c.output,
    KS_APP_ID: c.appId,
    KS_STATE_DIR: c.stateDir,
    KS_THREADS: String(c.threads),
    KS_CACHE_BYTES: c.cache,
  };
  const spawnedAt = Date.now();
  const proc = spawn(
    'java',
    [
      ...s.javaOpts,
      `-Dorg.slf4j.simpleLogger.defaultLogLevel=${s.logLevel}`,
      '-Dorg.slf4j.simpleLogger.showDateTime=true',
      '-cp',
      cp,
      MAIN_CLASS,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (proc.pid === undefined) throw new Error('java did not start');
  children.add(proc);
  const exited = new Promise<number | null>((r) =>
    proc.on('exit', (code) => {
      children.delete(proc);
      r(code);
    }),
  );
  const events: Events = { states: [], restoreStart: [], restoreEnd: [] };
  let tail: string[] = [];
  createInterface({ input: proc.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    log.write(`${line}\n`);
    const f = line.split(' ');
    const at = Number(f[1]);
    if (f[0] === 'START') events.start = at;
    else if (f[0] === 'STATE') events.states.push({ at, from: f[2] ?? '', to: f[3] ?? '' });
    else if (f[0] === 'RESTORE_START')
      events.restoreStart.push({ at, tp: f[2] ?? '', from: Number(f[3]), to: Number(f[4]) });
    else if (f[0] === 'RESTORE_END') events.restoreEnd.push({ at, tp: f[2] ?? '', records: Number(f[3]) });
  });
  createInterface({ input: proc.stderr as NodeJS.ReadableStream }).on('line', (line) => {
    log.write(`${line}\n`);
    tail.push(line);
    if (tail.length > 40) tail = tail.slice(-40);
  });
  proc.on('exit', () => log.end());
  return { proc, pid: proc.pid, events, spawnedAt, exited, stderrTail: () => tail.join('\n') };
}

export async function stopJvm(j: Jvm, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (j.proc.exitCode !== null || j.proc.signalCode !== null) return;
  j.proc.kill(signal);
  const t = setTimeout(() => j.proc.kill('SIGKILL'), 30_000);
  await j.exited;
  clearTimeout(t);
}

export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** utime + stime of a process, in seconds (undefined once it has exited). */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** VmHWM (peak RSS) of a process, in MB. */
export function peakRssMb(pid: number): number | undefined {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}
