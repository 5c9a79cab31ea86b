/**
 * `redfence chaos --handler`: handler instances calling the far side the harness starts, under kills, a
 * zombie and two instances. The built-in webhook handler (ctx.once around its call) passes; a handler
 * that makes its call without ctx.once (test/chaos/fixtures/webhook-no-once.mjs), with a long commit
 * interval so a replay reaches back further than the in-flight window, fails with exit 1 and names the
 * duplicated records (id and key). Bad options and modules exit 2 with a code, before any connection.
 * The verdict's rules are also checked on hand-made calls, without services.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { FarSideCall, FarSideReturn } from '../../src/chaos/far-side.js';
import { judgeHandlerRun } from '../../src/chaos/handler-verdict.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const fixture = (name: string) => join(FIXTURES, name);

const chaos = (args: string[]) => runCli(['chaos', ...args]);

const common = [
  '--handler',
  '--brokers',
  KAFKA_BROKERS,
  '--partitions',
  '4',
  '--records',
  '600',
  '--duration',
  '10',
  '--scale',
  '2',
  '--session-timeout',
  '6000',
  '--quiet',
];

describe('redfence chaos --handler against Kafka, its own Redis and a far side', { timeout: 240_000 }, () => {
  it('ctx.once passes under kills and a zombie, with replays; the same call without it is caught on every seed', async () => {
    // The passing run's own settings (two kills, a zombie, the default 3 s commit interval) for both.
    // Seeds whose first fault hits i0 (started first: it holds partitions from the start) between 24 and
    // 42% of the production window, while both instances are live: 39 kills it at 24%, 26 at 42%, 29
    // stops it (the zombie) at 42%. A fault on i1 alone can land before i1 holds any partition on a
    // loaded machine, and then nothing is replayed.
    const faults = ['--kills', '2', '--zombies', '1'];
    const noOnce = (seed: number) =>
      chaos([fixture('webhook-no-once.mjs'), ...common, ...faults, '--seed', String(seed)]);
    const [once, first] = await Promise.all([chaos([...common, ...faults, '--seed', '39']), noOnce(39)]);
    assert.equal(once.code, 0, `${once.out}\n${once.err}`);
    assert.match(once.out, /VERDICT: OK/);
    assert.match(once.out, /\| kill +\| 2 of 2 \|/);
    assert.match(once.out, /\| zombie +\| 1 of 1 \|/);
    assert.match(once.out, /\| input records +\| +600 \|/);
    assert.match(once.out, /\| committed \/ end offsets +\| 600 \/ 600 \|/);
    // the faults made records run again after their handle had returned: ctx.once skipped each
    const again = Number(/\| records handled again after a return +\| +(\d+) \|/.exec(once.out)?.[1]);
    assert.ok(again > 0, `no record was handled again: the faults replayed nothing\n${once.out}`);

    for (const r of [first, ...(await Promise.all([noOnce(26), noOnce(29)]))]) {
      assert.equal(r.code, 1, `${r.out}\n${r.err}`);
      assert.match(r.out, /VERDICT: FAILED/);
      assert.match(
        r.out,
        /VIOLATION \[duplicate\] record \d+\/\d+ \(id "chaos-hdl-[^"]+\/\d+\/\d+", key "k-\d+"\)/,
      );
      assert.match(r.out, /\| missing +\| +0 \|/);
    }
  });

  it('bad options and modules exit 2 with a code, before any connection', async () => {
    for (const [what, args, pattern] of [
      [
        'a crash point',
        ['--handler', '--crashes', '1'],
        /--crashes applies to processors.*\[RF_INVALID_OPTIONS\]/,
      ],
      [
        'a mode',
        ['--handler', '--mode', 'exactly-once'],
        /--mode applies to processors.*\[RF_INVALID_OPTIONS\]/,
      ],
      [
        'a far side flag without --handler',
        ['--far-latency', '5'],
        /--far-latency applies to --handler.*\[RF_INVALID_OPTIONS\]/,
      ],
      [
        'a commit interval of 0 for handlers',
        ['--handler', '--commit-interval', '0'],
        /--commit-interval with --handler must be at least 1.*\[RF_INVALID_OPTIONS\]/,
      ],
      [
        'a failure rate out of range',
        ['--handler', '--far-failure-rate', '0.9'],
        /far-failure-rate.*\[RF_INVALID_OPTIONS\]/,
      ],
      [
        'a processor module',
        ['--handler', fixture('max-reading.mjs')],
        /exports a processor.*\[RF_MODULE_INVALID\]/,
      ],
      ['no such module', ['--handler', fixture('nope.mjs')], /no such file.*\[RF_MODULE_INVALID\]/],
    ] as Array<[string, string[], RegExp]>) {
      const r = await chaos([...args, '--brokers', '127.0.0.1:1', '--quiet']);
      assert.equal(r.code, 2, `${what}: ${r.out}${r.err}`);
      assert.match(r.err, pattern, what);
    }
  });
});

describe('the handler verdict', () => {
  const call = (
    seq: number,
    p: number,
    o: number,
    instance: string,
    answeredAt: number,
    status = 200,
  ): FarSideCall => ({
    seq,
    id: `t/${p}/${o}`,
    partition: p,
    offset: o,
    instance,
    status,
    receivedAt: answeredAt - 5,
    answeredAt,
  });
  const key = (s: string) => Buffer.from(s).toString('hex');
  const base = {
    records: [
      { partition: 0, offset: 0, key: key('a') },
      { partition: 0, offset: 1, key: key('a') },
      { partition: 0, offset: 2, key: key('b') },
    ],
    deadLettered: new Set<string>(),
    zombies: new Set<string>(),
    committed: new Map([[0, 3]]),
    ends: new Map([[0, 3]]),
    returns: [] as FarSideReturn[],
  };
  const ret = (p: number, o: number, instance: string, at: number): FarSideReturn => ({
    partition: p,
    offset: o,
    instance,
    at,
  });

  it('allows a repeat of an effect whose handle call never returned before a kill, and names one that returned', () => {
    const calls = [
      call(0, 0, 0, 'i0#0', 1000),
      call(1, 0, 1, 'i0#0', 1000, 503),
      // answered 8 s before the kill, but its handle call never returned (a mark that never came)
      call(2, 0, 1, 'i0#0', 2000),
      // answered 0.1 s before the kill, and its handle call returned: marked, however close to the kill
      call(3, 0, 2, 'i0#0', 9900),
      // i0#0 killed at 10000; i0#1 replays: offset 0 is skipped (no effect), offsets 1 and 2 take effect
      call(4, 0, 1, 'i0#1', 11_000),
      call(5, 0, 2, 'i0#1', 11_010),
    ];
    const returns = [
      ret(0, 0, 'i0#0', 1002),
      ret(0, 2, 'i0#0', 9905),
      ret(0, 0, 'i0#1', 10_990),
      ret(0, 1, 'i0#1', 11_002),
      ret(0, 2, 'i0#1', 11_012),
    ];
    const r = judgeHandlerRun({ ...base, calls, returns, deaths: new Map([['i0#0', 10_000]]) });
    assert.equal(r.failedCalls, 1);
    assert.equal(r.effects, 5);
    assert.equal(r.replayedRecords, 1);
    assert.equal(r.unmarkedEffects, 1);
    assert.equal(r.handledAgain, 2);
    assert.equal(r.counts.get('duplicate'), 1);
    assert.match(
      r.violations[0]?.message ?? '',
      /record 0\/2 \(id "t\/0\/2", key "b"\): 2 effects, 1 before the last .*\(i0#0\)/,
    );
    // the same calls with no return reported: every repeat is excused (the process died before a mark)
    const none = judgeHandlerRun({ ...base, calls, deaths: new Map([['i0#0', 10_000]]) });
    assert.equal(none.counts.get('duplicate'), undefined);
    assert.equal(none.replayedRecords, 2);
    // a repeat by a process that never died is a duplicate even when its call did not return
    const alive = judgeHandlerRun({ ...base, calls, deaths: new Map() });
    assert.equal(alive.counts.get('duplicate'), 2);
  });

  it('names a marked effect repeated by a replay that was itself in flight at the next kill', () => {
    const calls = [
      call(0, 0, 0, 'i0#0', 1000),
      call(1, 0, 1, 'i0#0', 9500),
      call(2, 0, 2, 'i0#0', 9600),
      // i0#0 killed at 10000: offset 0 (answered 1000) was done and marked, 1 and 2 were in flight
      call(3, 0, 0, 'i0#1', 11_000),
      call(4, 0, 1, 'i0#1', 11_010),
      call(5, 0, 2, 'i0#1', 11_020),
      // i0#1 killed at 11500: all three replays were in flight; i0#2 repeats only offset 2
      call(6, 0, 2, 'i0#2', 13_000),
    ];
    const deaths = new Map([
      ['i0#0', 10_000],
      ['i0#1', 11_500],
    ]);
    const returns = [ret(0, 0, 'i0#0', 1001), ret(0, 2, 'i0#2', 13_001)];
    const r = judgeHandlerRun({ ...base, calls, deaths, returns });
    assert.equal(r.counts.get('duplicate'), 1);
    assert.match(r.violations[0]?.message ?? '', /record 0\/0 .*2 effects, 1 before the last .*\(i0#0\)/);
    assert.equal(r.replayedRecords, 2);
    // a zombie's effect after its stop is counted apart, wherever it falls
    const z = judgeHandlerRun({
      ...base,
      calls: [call(0, 0, 0, 'i0#1', 2000), call(1, 0, 0, 'z#0', 3000), call(2, 0, 1, 'z#0', 3000)],
      deaths: new Map([['z#0', 2500]]),
      zombies: new Set(['z#0']),
    });
    assert.equal(z.counts.get('duplicate'), undefined);
    assert.equal(z.zombieEffects, 2);
    assert.equal(z.zombieEffectsRepeated, 1);
  });

  it('names a missing record, a key out of order and a commit short of the end', () => {
    const calls = [call(0, 0, 1, 'i0#0', 1000), call(1, 0, 0, 'i0#0', 2000)];
    const r = judgeHandlerRun({
      ...base,
      calls,
      deaths: new Map(),
      committed: new Map([[0, 2]]),
    });
    assert.equal(r.counts.get('missing'), 1);
    assert.equal(r.counts.get('order'), 1);
    assert.equal(r.counts.get('offsets'), 1);
    assert.match(
      r.violations.map((v) => v.message).join('\n'),
      /key "a" on partition 0: offset 1 took effect before offset 0/,
    );
    // a dead letter stands for its record's effect
    const dl = judgeHandlerRun({ ...base, calls, deaths: new Map(), deadLettered: new Set(['0/2']) });
    assert.equal(dl.counts.get('missing'), undefined);
  });
});
