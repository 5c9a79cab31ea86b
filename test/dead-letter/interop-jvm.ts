/** The JVM side of test/dead-letter/interop.test.ts: running DlqInterop, and reading its output. */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
export const NO_JAVA = java.error === undefined ? undefined : `no java on PATH (${java.error.message})`;
if (NO_JAVA !== undefined) console.log(`# skipping the dead-letter interop tests: ${NO_JAVA}`);

export type Line = Record<string, unknown> & { writer: string; key: string };

/** `redfence dlq <args>` in this process, as the CLI runs it. */
export async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(
    ['dlq', ...args],
    (s) => {
      out += s;
    },
    (s) => {
      err += s;
    },
  );
  return { code, out, err };
}

export const long = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
};

/** A value as `dlq show --values` prints it: UTF-8 text, or base64: when it is not. */
export const shown = (v: string): Buffer =>
  v.startsWith('base64:') ? Buffer.from(v.slice(7), 'base64') : Buffer.from(v, 'utf8');

/**
 * The message Spring writes (DeadLetterRecordManager.buildMessage in spring-kafka 4.1): under its
 * listener wrapper, the wrapper's message, "; ", the cause's; else the exception's own.
 */
export function springMessage(l: Line): unknown {
  return l.causeClass === undefined ? l.exceptionMessage : `${l.exceptionMessage}; ${l.causeMessage}`;
}

/** A small heap and a fast start: the program runs for seconds. */
const JVM = ['-Xms64m', '-Xmx384m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];

/** Runs the JVM writers once, bounded; every stdout line is one JSON object. */
export async function runJava(prefix: string, stateDir: string): Promise<Line[]> {
  const classpath = execFileSync('bash', [join(ROOT, 'scripts/interop-jars.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 300_000,
  }).trim();
  const child = spawn(
    'java',
    [...JVM, '-cp', classpath, 'DlqInterop', KAFKA_BROKERS, prefix, stateDir, '40'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 55_000);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(killer);
  assert.equal(code, 0, `DlqInterop exited ${code}:\n${err.slice(-4000)}`);
  return out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
}
