/**
 * A crash between the Redis write of a batch holding a tick and its commit (the wall-clock close of idle
 * partitions, `redfence run --idle-close`), exactly-once, on the real broker and Redis, with the
 * 1-second tumbling count with emit('final') of fixtures/idle-close.ts:
 * - A (no --idle-close) reads the events (two windows per key on each partition) to their end and stops:
 *   only the windows the records themselves closed have results, each key's last window is open;
 * - B (--idle-close 300, REDFENCE_CRASH_AT=after-redis-write, REDFENCE_CRASH_AFTER=3) finds the
 *   partitions idle with open windows, produces a tick into each (read back from the events topic:
 *   their header, null key), reads them (its only batches) and SIGKILLs itself after the Redis write of
 *   the third: that tick's final results are applied in Redis (its partition's keys' fences stand at the
 *   tick's offset) and neither produced nor committed (the counts topic lacks them, the group's offset is
 *   not past the tick);
 * - C (no --idle-close, so it makes no tick of its own) takes over once B's session expires, replays
 *   the uncommitted tick (REEMIT, from its /metrics) and commits past every tick. Then the counts topic
 *   (read_committed, to its end) holds every key's every window's final count exactly once, equal to what
 *   the records give and to the model of the events topic as read back, ticks included.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { partitionFor } from '../../src/partitioner/index.js';
import { KeyStore } from '../../src/store/index.js';
import { runModel } from '../../src/topology/model.js';
import { freePort, ProcessorChild } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { idleCount } from './fixtures/idle-close.js';
import {
  eventsAsInput,
  expectedFinals,
  finalsOf,
  IDLE_PARTITIONS,
  idleEvents,
  idleMessages,
} from './idle-close-helpers.js';

const FIXTURE = 'test/processor/fixtures/idle-close.ts';
const log = (s: string) => console.log(s);

async function start(ns: string, instance: string, extra: string[], env: Record<string, string>) {
  const port = await freePort();
  const args = [
    ...['--import', 'tsx', 'src/cli/bin.ts', 'run', FIXTURE],
    ...['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--mode', 'exactly-once'],
    ...['--instance', instance, '--metrics-port', String(port), '--session-timeout', '6000'],
    ...['--log', 'info', ...extra],
  ];
  return new ProcessorChild(instance, port, args, {
    ...process.env,
    IDLE_CLOSE_NS: ns,
    REDFENCE_CRASH_AT: '',
    REDFENCE_CRASH_AFTER: '',
    ...env,
  });
}

describe('idle close: a crash after the Redis write of a tick batch', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('the next instance re-emits the final results the tick closed, exactly once', async (t) => {
    const ns = uniqueName('idlecrash');
    const events = `${ns}-events`;
    const counts = `${ns}-counts`;
    const keep = { 'retention.ms': '-1' };
    t.after(
      await createTopics([
        { topic: events, partitions: IDLE_PARTITIONS, config: keep },
        { topic: counts, partitions: IDLE_PARTITIONS, config: keep },
        { topic: `${events}.DLT`, partitions: 1, config: keep },
      ]),
    );
    const children: ProcessorChild[] = [];
    t.after(async () => {
      await Promise.all(children.map((c) => c.kill()));
      const keys = await redis.keys(`rf:{${ns}*`);
      if (keys.length > 0) await redis.del(...keys);
    });
    const sent = idleEvents(Math.floor((Date.now() - 5000) / 1000) * 1000);
    await produce(events, idleMessages(sent));
    const ends = await endOffsets(events);
    const want = expectedFinals(sent);
    const built = idleCount(ns);
    const byRecords = runModel(built, (await eventsAsInput(events)).input).outputs.length;

    // A: the records to their end, no ticks
    const a = await start(ns, 'A', [], {});
    children.push(a);
    await pollUntil('A committed the events to their end', async () => {
      const at = await committedOffsets(ns, events);
      return [...ends].every(([p, end]) => at.get(p) === end);
    });
    a.term();
    assert.deepEqual(await a.waitExit(20_000), { code: 0, signal: null }, `A exits 0 ${a.tail()}`);
    assert.equal((await readToEnd(counts)).length, byRecords, 'A: the windows the records closed');
    assert.ok(byRecords < want.size, `each key's last window is open (${byRecords} of ${want.size})`);

    // B: ticks into the idle partitions; killed after the Redis write of its third tick batch
    const b = await start(ns, 'B', ['--idle-close', '300'], {
      REDFENCE_CRASH_AT: 'after-redis-write',
      REDFENCE_CRASH_AFTER: String(IDLE_PARTITIONS),
    });
    children.push(b);
    assert.deepEqual(
      await b.waitExit(60_000),
      { code: null, signal: 'SIGKILL' },
      `B died by SIGKILL ${b.tail()}`,
    );
    const { ticks } = await eventsAsInput(events);
    assert.equal(new Set(ticks.map((r) => r.partition)).size, IDLE_PARTITIONS, `a tick in each partition`);
    for (const r of ticks) assert.equal(String(r.headers['redfence-tick']), 'B', 'the tick names its maker');
    const committed = await committedOffsets(ns, events);
    const uncommitted = ticks.filter((r) => (committed.get(r.partition) ?? -1) <= Number(r.offset));
    assert.ok(uncommitted.length > 0, 'a tick batch applied by B was never committed');
    // its final results are applied in Redis under the tick's offset: its partition's keys' fences stand there
    const store = new KeyStore({ redis, app: ns });
    const fencedAt = new Set<string>();
    for (const key of new Set(sent.map((e) => e.key))) {
      const [p, o] = await redis.hmget(store.keys.fence(Buffer.from(key)), 'p', 'o');
      fencedAt.add(`${p}/${o}`);
    }
    assert.ok(
      uncommitted.some((r) => fencedAt.has(`${r.partition}/${r.offset}`)),
      `the uncommitted tick's final effects were written (${[...fencedAt].join(' ')})`,
    );
    const before = (await readToEnd(counts)).length;
    assert.ok(
      before < want.size,
      `the crashed batch's final results were not produced (${before} of ${want.size})`,
    );
    log(
      `B died with ${ticks.length} ticks made, ${uncommitted.length} uncommitted; ${before} results so far`,
    );

    // C: no ticks of its own; replays B's uncommitted tick batch
    const c = await start(ns, 'C', [], {});
    children.push(c);
    await c.log.waitAssigned(60_000);
    await pollUntil(
      'C committed past every tick',
      async () => {
        if (!c.alive) throw new Error(`C exited ${JSON.stringify(c.exit)} ${c.tail()}`);
        const at = await committedOffsets(ns, events);
        return ticks.every((r) => (at.get(r.partition) ?? -1) > Number(r.offset));
      },
      90_000,
    );
    const verdicts = await c.verdicts();
    c.term();
    assert.deepEqual(await c.waitExit(20_000), { code: 0, signal: null }, `C exits 0 ${c.tail()}`);
    assert.ok(
      (verdicts.get('REEMIT') ?? 0) > 0,
      `C re-emitted the crashed tick's results (${JSON.stringify(Object.fromEntries(verdicts))})`,
    );

    const rows = await readToEnd(counts);
    assert.deepEqual(finalsOf(rows), want, "every key's every window once, with its count");
    const { input } = await eventsAsInput(events);
    assert.equal(input.filter((r) => r.key === null).length, ticks.length, 'C made no tick');
    assert.deepEqual(
      rows.map((r) => `${r.key} ${r.value} @${r.timestamp}`).sort(),
      runModel(built, input)
        .outputs.map((o) => `${o.key} ${o.value} @${o.timestamp}`)
        .sort(),
      'the outputs are the model of the events topic, ticks included',
    );
    // each key on its murmur2 partition (the fences above are per key)
    for (const e of sent) assert.equal(partitionFor(Buffer.from(e.key), IDLE_PARTITIONS), e.partition);
  });
});
