/**
 * `redfence chaos` stopped by SIGINT or SIGTERM (Ctrl-C, a supervisor) mid-run: it exits 130 / 143 and no
 * instance or redis-server it started outlives it. Before, a signal's default action ended the harness
 * without its exit listener, leaving the processes it had spawned running.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { KAFKA_BROKERS } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;

/** Running (not gone, not a zombie waiting to be reaped). */
function running(pid: number): boolean {
  try {
    const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return state !== undefined && state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
}

describe('redfence chaos interrupted', { timeout: 120_000 }, () => {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`${signal}: exit ${code}, every instance and redis-server it started stopped`, async () => {
      const proc = spawn(
        process.execPath,
        [
          BIN,
          'chaos',
          '--brokers',
          KAFKA_BROKERS,
          '--partitions',
          '3',
          '--records',
          '50000',
          '--duration',
          '60',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      let err = '';
      proc.stdout.on('data', (d: Buffer) => {
        out += d.toString();
      });
      proc.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      const exited = new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
      await pollUntil(
        'an instance started',
        () => /started i0#0 \(pid \d+\)/.test(out) || proc.exitCode !== null,
        60_000,
      );
      assert.equal(proc.exitCode, null, `the run ended early\n${out}\n${err}`);
      const instance = Number(/started i0#0 \(pid (\d+)\)/.exec(out)?.[1]);
      const children = childrenOf(proc.pid as number);
      assert.ok(children.includes(instance), `the instance ${instance} is the harness's child (${children})`);
      assert.ok(children.length >= 2, `the instance and a redis-server are running: ${children}`);
      assert.ok(children.every(running));
      proc.kill(signal);
      assert.equal(await exited, code, `${out}\n${err}`);
      assert.match(err, new RegExp(`${signal}: stopping the run's instances and redis-servers`));
      await pollUntil(`the children ${children} stopped`, () => !children.some(running), 10_000);
    });
  }
});
