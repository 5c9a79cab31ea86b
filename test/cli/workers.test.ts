/**
 * `redfence run --workers 2` through the built CLI (dist/cli/bin.js) on the package's compiled
 * customer-totals processor (dist/chaos/customer-totals.js), against the real broker and Redis:
 * - both workers join one group and get partitions of a 4-partition input; N orders produced then end
 *   as exactly one output per order per key and the exact totals in Redis; each worker serves its
 *   metrics on port+i; SIGTERM to the supervisor ends every worker cleanly and it exits 0 with the
 *   committed offsets at the end;
 * - a worker SIGKILLed mid-stream: the supervisor logs it, stops the other worker cleanly and exits 1
 *   (the documented rule: no restart in place); started again (as a supervisor would), the instance
 *   finishes with the outputs and totals exact (exactly-once);
 * - a worker that cannot stop (SIGSTOPped) is SIGKILLed at --shutdown-timeout, and the exit is 1;
 * - workers whose supervisor is SIGKILLed (their IPC channel closes) exit by themselves;
 * - two workers on a 1-partition input: the supervisor warns once that some will be idle;
 * - a module that cannot load is refused once by the supervisor (exit 2), before any worker is forked.
 * Every wait polls with a bound; no sleep synchronises anything.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Child, type LogLine } from '../../src/harness/index.js';
import { Fence } from '../../src/index.js';
import { freePort } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo, customerOrders } from '../helpers/outputs.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const BIN = `${ROOT}dist/cli/bin.js`;
const MODULE = `${ROOT}dist/chaos/customer-totals.js`;
const PARTITIONS = 4;
const dir = mkdtempSync(join(tmpdir(), 'redfence-workers-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Names {
  orders: string;
  totals: string;
  store: string;
  group: string;
  instance: string;
}

function names(prefix: string): Names {
  const ns = uniqueName(prefix);
  return { orders: `${ns}-in`, totals: `${ns}-out`, store: ns, group: ns, instance: `i${ns.slice(-6)}` };
}

async function topics(n: Names): Promise<() => Promise<void>> {
  return createTopics([
    { topic: n.orders, partitions: PARTITIONS },
    { topic: n.totals, partitions: PARTITIONS },
    { topic: `${n.orders}.DLT`, partitions: PARTITIONS },
  ]);
}

/** The environment of this process without its REDIS_/KAFKA_/REDFENCE_ variables. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_)/.test(k)),
  );
  return { ...base, ...extra };
}

/** `redfence run <customer-totals> --workers 2` on the run's topics, as a child (the shared spawner). */
function startInstance(n: Names, name: string, args: string[] = []): Child {
  return new Child({
    name,
    command: process.execPath,
    args: [
      BIN,
      'run',
      MODULE,
      '--brokers',
      KAFKA_BROKERS,
      '--redis',
      REDIS_URL,
      '--group',
      n.group,
      '--instance',
      n.instance,
      '--session-timeout',
      '6000',
      ...(args.includes('--shutdown-timeout') ? [] : ['--shutdown-timeout', '20000']),
      '--allow-eviction',
      ...args,
    ],
    cwd: ROOT,
    env: cleanEnv({
      ORDERS_TOPIC: n.orders,
      TOTALS_TOPIC: n.totals,
      TOTALS_STORE: n.store,
      REDFENCE_WORKERS: '2',
    }),
  });
}

const ofWorker = (n: Names, i: number) => (l: LogLine) =>
  l.instance === `${n.instance}-${i}` && l.worker === i;
const assignedTo = (n: Names, i: number) => (l: LogLine) =>
  ofWorker(n, i)(l) &&
  l.msg === 'partitions assigned' &&
  Array.isArray(l.partitions) &&
  l.partitions.length > 0;

/** Waits until the supervisor reports both workers started and each worker has been given partitions. */
async function bothAssigned(c: Child, n: Names): Promise<void> {
  await c.log.waitFor('workers started', (l) => l.msg === 'workers started', 60_000);
  for (const i of [0, 1]) await c.log.waitFor(`worker ${i} assigned partitions`, assignedTo(n, i), 60_000);
}

const sum = (m: Map<number, number>) => [...m.values()].reduce((s, v) => s + Math.max(0, v), 0);

/** True once the group's committed offsets equal the input's end offsets on every partition. */
async function atEnd(n: Names): Promise<boolean> {
  const [committed, ends] = await Promise.all([committedOffsets(n.group, n.orders), endOffsets(n.orders)]);
  return [...ends].every(([p, end]) => (committed.get(p) ?? 0) === end);
}

/** Outputs: exactly one per order per key (counts 1..n once each); Redis: each customer's exact total. */
async function assertExact(n: Names, amounts: Map<string, number[]>): Promise<void> {
  const outputs = await readToEnd(n.totals);
  const counts = new Map([...amounts].map(([c, list]) => [c, list.length]));
  assertPerKey('outputs (read_committed)', outputs, countOf, countsUpTo(counts));
  const redis = standalone();
  try {
    const fence = new Fence({ redis, store: n.store, mode: 'strict' });
    for (const [customer, list] of amounts) {
      const s = await fence.read(customer);
      const v = JSON.parse(s?.value?.toString('utf8') ?? 'null') as { total: number; count: number };
      assert.deepEqual(
        v,
        { total: list.reduce((a, b) => a + b, 0), count: list.length },
        `state of ${customer}`,
      );
    }
  } finally {
    redis.disconnect();
  }
}

/** Per partition, the highest input offset the fence has applied to any customer of `amounts`. */
async function appliedUpTo(n: Names, amounts: Map<string, number[]>): Promise<Map<number, number>> {
  const redis = standalone();
  try {
    const fence = new Fence({ redis, store: n.store, mode: 'strict' });
    const out = new Map<number, number>();
    for (const customer of amounts.keys()) {
      const s = await fence.read(customer);
      if (s !== null) out.set(s.partition, Math.max(out.get(s.partition) ?? -1, s.offset));
    }
    return out;
  } finally {
    redis.disconnect();
  }
}

/** REEMIT verdicts counted by both workers (metrics on port and port + 1) on these partitions. */
async function reemitsOn(port: number, topic: string, partitions: number[]): Promise<number> {
  let total = 0;
  for (const i of [0, 1]) {
    const text = await (await fetch(`http://127.0.0.1:${port + i}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith('redfence_verdicts_total{')) continue;
      const labels = Object.fromEntries(
        [...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] as string, m[2] as string]),
      );
      if (
        labels.topic === topic &&
        /^reemit$/i.test(labels.verdict ?? '') &&
        partitions.includes(Number(labels.partition))
      )
        total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

/** A port p with p and p + 1 both free (worker i serves on p + i). */
async function twoFreePorts(): Promise<number> {
  for (;;) {
    const p = await freePort();
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(p + 1, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free && p < 65535) return p;
  }
}

describe('redfence run --workers', { timeout: 240_000 }, () => {
  it('two workers share the partitions; outputs and totals exact; SIGTERM ends all cleanly (exit 0)', async (t) => {
    const n = names('cli-workers');
    t.after(await topics(n));
    const port = await twoFreePorts();
    const c = startInstance(n, 'supervisor', ['--metrics-port', String(port)]);
    t.after(() => c.kill());
    await bothAssigned(c, n);
    for (const i of [0, 1]) {
      const res = await fetch(`http://127.0.0.1:${port + i}/readyz`);
      assert.equal(res.status, 200, `worker ${i} serves /readyz on ${port}+${i}`);
    }

    const { messages, amounts } = customerOrders(4000, 40);
    await produce(n.orders, messages);
    await pollUntil('committed offsets at the end of the input', () => atEnd(n), 90_000, 250);
    await assertExact(n, amounts);

    c.signal('SIGTERM');
    const exit = await c.waitExit(30_000);
    assert.deepEqual(exit, { code: 0, signal: null }, c.tail(30));
    for (const i of [0, 1])
      assert.ok(
        c.log.seen((l) => ofWorker(n, i)(l) && l.msg === 'processor closed'),
        `worker ${i} closed`,
      );
    assert.ok(c.log.seen((l) => l.msg === 'all workers exited' && l.status === 0));
    assert.ok(await atEnd(n), 'committed offsets still at the end after the shutdown');
    assert.equal(c.output.count, 0, `no other output: ${c.output.tail()}`);
  });

  it('a worker SIGKILLed mid-stream stops the instance (exit 1); restarted, it finishes exactly once', async (t) => {
    const n = names('cli-workers-kill');
    t.after(await topics(n));
    const first = startInstance(n, 'first', ['--static']);
    t.after(() => first.kill());
    await bothAssigned(first, n);
    const forked = first.log.find((l) => l.msg === 'worker forked' && l.worker === 1)[0];
    const pid = forked?.pid;
    assert.ok(typeof pid === 'number', `worker 1's pid logged ${first.tail()}`);

    const { messages, amounts } = customerOrders(30_000, 200);
    const producing = produce(n.orders, messages);
    await pollUntil(
      'some orders committed',
      async () => sum(await committedOffsets(n.group, n.orders)) > 0,
      60_000,
      50,
    );
    // worker 1's partitions at the kill: its assignments less its revocations (cooperative: incremental)
    const owned = new Set<number>();
    for (const l of first.log.find(
      (x) => ofWorker(n, 1)(x) && /^partitions (assigned|revoked)$/.test(x.msg ?? ''),
    ))
      for (const p of (l.partitions as number[] | undefined) ?? [])
        if (l.msg === 'partitions assigned') owned.add(p);
        else owned.delete(p);
    const killedParts = [...owned].sort((a, b) => a - b);
    assert.ok(killedParts.length > 0, `worker 1's partitions logged ${first.tail()}`);
    // The kill must hit uncommitted work: worker 1 is frozen (SIGSTOP, far below the session timeout)
    // while the group's committed offsets and the fence's applied offsets are read; it is killed
    // frozen once the fence holds records applied at or past the committed offset on one of its
    // partitions, else woken to go on.
    let committed = new Map<number, number>();
    let applied = new Map<number, number>();
    let past: number[] = [];
    await pollUntil(
      'worker 1 frozen with applied records not committed',
      async () => {
        process.kill(pid, 'SIGSTOP');
        committed = await committedOffsets(n.group, n.orders);
        applied = await appliedUpTo(n, amounts);
        past = killedParts.filter((p) => (applied.get(p) ?? -1) >= (committed.get(p) ?? 0));
        if (past.length === 0) process.kill(pid, 'SIGCONT');
        return past.length > 0;
      },
      60_000,
      50,
    );
    process.kill(pid, 'SIGKILL');
    console.log(
      `worker 1 (partitions ${killedParts.join(', ')}) killed; applied up to / committed: ${killedParts
        .map((p) => `${p}: ${applied.get(p) ?? '-'} / ${committed.get(p) ?? '-'}`)
        .join(', ')}`,
    );
    const killedAt = sum(await committedOffsets(n.group, n.orders));
    const exit = await first.waitExit(30_000);
    assert.deepEqual(exit, { code: 1, signal: null }, first.tail(30));
    const died = first.log.find((l) => l.msg === 'worker exited unexpectedly: stopping the other workers');
    assert.equal(died.length, 1, first.tail(30));
    assert.equal(died[0]?.worker, 1);
    assert.equal(died[0]?.signal, 'SIGKILL');
    assert.ok(
      first.log.seen((l) => ofWorker(n, 0)(l) && l.msg === 'processor closed'),
      `worker 0 closed cleanly ${first.tail(30)}`,
    );
    await producing;
    const ends = sum(await endOffsets(n.orders));
    console.log(`worker 1 killed with ${killedAt} of ${ends} orders committed`);

    // Nothing of worker 1's partitions was committed after the kill: what it had applied past the
    // committed offsets is still to be taken again (without a second effect) by the restarted instance.
    const after = await committedOffsets(n.group, n.orders);
    assert.ok(
      past.some((p) => (applied.get(p) ?? -1) >= (after.get(p) ?? 0)),
      `the killed worker left applied records uncommitted: ${JSON.stringify([...after])}`,
    );

    // what a supervisor does: start the instance again, same --instance (static ids, transactional ids)
    const port = await twoFreePorts();
    const second = startInstance(n, 'second', ['--static', '--metrics-port', String(port)]);
    t.after(() => second.kill());
    await pollUntil('committed offsets at the end of the input', () => atEnd(n), 120_000, 250);
    await assertExact(n, amounts);
    // the records applied but not committed came again and the fence answered REEMIT (their outputs
    // sent again from Redis, the state not applied twice: assertExact above)
    const reemitted = await reemitsOn(port, n.orders, past);
    console.log(`REEMIT on the killed worker's partitions after the restart: ${reemitted}`);
    assert.ok(reemitted > 0, 'the restarted instance took the uncommitted records again (REEMIT)');
    second.signal('SIGTERM');
    assert.deepEqual(await second.waitExit(30_000), { code: 0, signal: null }, second.tail(30));
  });

  it('a worker that does not stop within --shutdown-timeout is killed and the exit is 1', async (t) => {
    const n = names('cli-workers-stuck');
    t.after(await topics(n));
    const c = startInstance(n, 'stuck', ['--shutdown-timeout', '2000']);
    t.after(() => c.kill());
    await bothAssigned(c, n);
    const pid = c.log.find((l) => l.msg === 'worker forked' && l.worker === 0)[0]?.pid as number;
    process.kill(pid, 'SIGSTOP'); // worker 0 can no longer take the forwarded SIGTERM
    const sent = Date.now();
    c.signal('SIGTERM');
    const exit = await c.waitExit(20_000);
    assert.deepEqual(exit, { code: 1, signal: null }, c.tail(30));
    assert.ok(Date.now() - sent < 2000 + 5000, `exited ${Date.now() - sent} ms after SIGTERM`);
    const timedOut = c.log.find(
      (l) => l.msg === 'graceful shutdown timed out: killing the workers still running',
    );
    assert.deepEqual(timedOut[0]?.workers, [0], c.tail(30));
    assert.ok(
      c.log.seen((l) => ofWorker(n, 1)(l) && l.msg === 'processor closed'),
      'worker 1 closed',
    );
  });

  it('workers whose supervisor is SIGKILLed shut down by themselves', async (t) => {
    const n = names('cli-workers-orphans');
    t.after(await topics(n));
    const c = startInstance(n, 'orphaned', ['--shutdown-timeout', '5000']);
    t.after(() => c.kill());
    await bothAssigned(c, n);
    const pids = c.log.find((l) => l.msg === 'worker forked').map((l) => l.pid as number);
    assert.equal(pids.length, 2);
    const running = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    t.after(() => {
      for (const pid of pids.filter(running)) process.kill(pid, 'SIGKILL');
    });
    await c.kill();
    await pollUntil('both workers exited', () => !pids.some(running), 5000 + 5000);
  });

  it('more workers than input partitions: a warning that some will be idle', async (t) => {
    const n = names('cli-workers-idle');
    t.after(
      await createTopics([
        { topic: n.orders, partitions: 1 },
        { topic: n.totals, partitions: 1 },
        { topic: `${n.orders}.DLT`, partitions: 1 },
      ]),
    );
    const c = startInstance(n, 'idle');
    t.after(() => c.kill());
    await c.log.waitFor('workers started', (l) => l.msg === 'workers started', 60_000);
    const warned = c.log.find(
      (l) => l.msg === 'more workers than input partitions: some workers will be idle',
    );
    assert.equal(warned.length, 1, c.tail(30));
    assert.equal(warned[0]?.level, 'warn');
    assert.deepEqual([warned[0]?.workers, warned[0]?.partitions], [2, 1]);
    c.signal('SIGTERM');
    assert.deepEqual(await c.waitExit(30_000), { code: 0, signal: null }, c.tail(30));
  });

  it('a module that cannot load is refused once, before any worker is forked (exit 2)', async () => {
    const bad = join(dir, 'bad.mjs');
    writeFileSync(bad, 'export const x = 1;\n');
    const c = new Child({
      name: 'bad-module',
      command: process.execPath,
      args: [BIN, 'run', bad, '--workers', '2', '--redis', 'redis://127.0.0.1:1'],
      env: cleanEnv({}),
    });
    const exit = await c.waitExit(20_000);
    assert.equal(exit.code, 2);
    assert.equal(c.log.count, 0, 'no worker forked');
    assert.deepEqual(c.output.lines, [
      `redfence run: ${bad} exports no processor: export default defineProcessor({ ... }) (or export it as "processor") [RF_MODULE_INVALID]`,
    ]);
  });
});
