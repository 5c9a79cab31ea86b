/** The lag evaluator as pure logic: each status and reason from crafted windows. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { evaluateLag, type LagSample, LagWindow, worstStatus } from '../../src/metrics/lag.js';

/** Samples one second apart from [committed, end] pairs. */
const w = (pairs: [number | undefined, number][], extra: Partial<LagSample> = {}): LagSample[] =>
  pairs.map(([committed, end], i) => ({ at: i * 1000, committed, end, ...extra }));

describe('evaluateLag', () => {
  it('OK with a zero lag in the window; rate, produce rate and ETA 0', () => {
    const e = evaluateLag(
      w([
        [100, 100],
        [100, 100],
        [100, 100],
      ]),
    );
    assert.equal(e.status, 'OK');
    assert.deepEqual(e.reasons, ['lag-zero']);
    assert.equal(e.lag, 0);
    assert.equal(e.rate, 0);
    assert.equal(e.etaSeconds, 0);
    assert.equal(e.timeLagSeconds, 0);
  });

  it('OK while catching up, with the ETA from the net rate', () => {
    // consumes 100/s, produces 20/s: lag 300 -> 220 -> 140, net 80/s
    const e = evaluateLag(
      w([
        [0, 300],
        [100, 320],
        [200, 340],
      ]),
    );
    assert.equal(e.status, 'OK');
    assert.deepEqual(e.reasons, ['catching-up']);
    assert.equal(e.lag, 140);
    assert.equal(e.rate, 100);
    assert.equal(e.produceRate, 20);
    assert.equal(e.etaSeconds, 140 / 80);
  });

  it('WARN when committed moves but the lag does not fall; no ETA', () => {
    const e = evaluateLag(
      w([
        [0, 100],
        [10, 120],
        [20, 140],
      ]),
    );
    assert.equal(e.status, 'WARN');
    assert.deepEqual(e.reasons, ['lag-not-decreasing']);
    assert.equal(e.etaSeconds, null);
  });

  it('STALL when committed does not move with lag and an owner; seed 003 calls it dead', () => {
    const e = evaluateLag(
      w(
        [
          [50, 100],
          [50, 100],
          [50, 110],
        ],
        { owned: true },
      ),
    );
    assert.equal(e.status, 'STALL');
    assert.deepEqual(e.reasons, ['committed-stuck', 'dead']);
    assert.equal(e.rate, 0);
  });

  it('STOP when committed does not move with lag and no member owns the partition', () => {
    const e = evaluateLag(
      w(
        [
          [50, 100],
          [50, 100],
        ],
        { owned: false },
      ),
    );
    assert.equal(e.status, 'STOP');
    assert.deepEqual(e.reasons, ['no-owner', 'dead']);
  });

  it('REWIND when committed moves backwards, even through a zero lag', () => {
    const e = evaluateLag(
      w([
        [100, 100],
        [40, 100],
        [60, 100],
      ]),
    );
    assert.equal(e.status, 'REWIND');
    assert.deepEqual(e.reasons, ['rewind']);
  });

  it('ERR when an offset cannot be read, or the group never committed', () => {
    const unread = evaluateLag([{ at: 0, committed: 1, end: undefined, error: 'timed out' }]);
    assert.equal(unread.status, 'ERR');
    assert.deepEqual(unread.reasons, ['unreadable']);
    assert.equal(unread.lag, null);
    const none = evaluateLag(
      w([
        [undefined, 10],
        [undefined, 10],
      ]),
    );
    assert.equal(none.status, 'ERR');
    assert.deepEqual(none.reasons, ['no-commit']);
    // a partition that never held a record needs no commit: OK at lag 0, its committed offset unknown
    const empty = evaluateLag(
      w([
        [undefined, 0],
        [undefined, 0],
      ]),
    );
    assert.equal(empty.status, 'OK');
    assert.deepEqual(empty.reasons, ['lag-zero']);
    assert.equal(empty.lag, 0);
    assert.equal(empty.committed, null);
    // once it holds records, a group with no commit for it is ERR again
    assert.deepEqual(
      evaluateLag(
        w([
          [undefined, 0],
          [undefined, 3],
        ]),
      ).reasons,
      ['no-commit'],
    );
    assert.equal(evaluateLag([]).status, 'ERR');
  });

  it('seed 003: lag above the threshold while consuming is slow, WARN at least', () => {
    const e = evaluateLag(
      w([
        [0, 50_000],
        [5_000, 50_000],
      ]),
    );
    assert.equal(e.status, 'WARN');
    assert.deepEqual(e.reasons, ['catching-up', 'slow']);
    const custom = evaluateLag(
      w([
        [0, 500],
        [100, 500],
      ]),
      { slowLag: 100 },
    );
    assert.deepEqual(custom.reasons, ['catching-up', 'slow']);
    const below = evaluateLag(
      w([
        [0, 500],
        [100, 500],
      ]),
    );
    assert.equal(below.status, 'OK');
  });

  it('lag counts against the end given (a last stable offset below the high watermark)', () => {
    // committed 90: an open transaction holds the last stable offset at 90 -> no lag
    assert.equal(
      evaluateLag(
        w([
          [90, 90],
          [90, 90],
        ]),
      ).status,
      'OK',
    );
  });

  it('time lag from the next record timestamp; null when not read', () => {
    const e = evaluateLag(
      w(
        [
          [0, 10],
          [5, 10],
        ],
        { nextRecordTime: 10_000 },
      ),
      {},
      25_000,
    );
    assert.equal(e.timeLagSeconds, 15);
    assert.equal(
      evaluateLag(
        w([
          [0, 10],
          [5, 10],
        ]),
      ).timeLagSeconds,
      null,
    );
  });

  it('a single sample judges the lag only', () => {
    assert.equal(evaluateLag(w([[0, 10]])).status, 'OK');
    assert.equal(evaluateLag(w([[0, 20_000]])).status, 'WARN');
  });

  it('worstStatus orders ERR, STOP, STALL, REWIND, WARN, OK', () => {
    assert.equal(worstStatus(['OK', 'WARN', 'STALL']), 'STALL');
    assert.equal(worstStatus(['OK', 'ERR', 'STOP']), 'ERR');
    assert.equal(worstStatus([]), 'OK');
  });
});

describe('LagWindow', () => {
  it('a partition that stops committing turns STALL once a window passed', () => {
    const lw = new LagWindow(10_000);
    lw.add('t', 0, { at: 0, committed: 10, end: 100 });
    lw.add('t', 0, { at: 1_000, committed: 20, end: 100 });
    const early = lw.view(2_000)[0];
    assert.equal(evaluateLag(early?.window ?? []).status, 'OK');
    const late = lw.view(30_000)[0];
    assert.equal(late?.window.length, 2);
    assert.equal(evaluateLag(late?.window ?? []).status, 'STALL');
    lw.forget('t', 0);
    assert.deepEqual(lw.view(30_000), []);
  });

  it('commits closer than 250 ms replace the newest sample (memory stays bounded)', () => {
    const lw = new LagWindow(60_000);
    for (let i = 0; i < 1000; i++) lw.add('t', 0, { at: i, committed: i, end: 2000 });
    const v = lw.view(999)[0];
    assert.deepEqual(
      v?.window.map((s) => [s.at, s.committed]),
      [
        [0, 0],
        [999, 999],
      ],
    );
  });

  it('keeps one baseline older than the window', () => {
    const lw = new LagWindow(1_000);
    for (let i = 0; i < 10; i++) lw.add('t', 1, { at: i * 1000, committed: i, end: 100 });
    const v = lw.view(9_000)[0];
    // 7000 is the baseline: the newest sample before the window (8000..9000)
    assert.deepEqual(
      v?.window.map((s) => s.at),
      [7000, 8000, 9000],
    );
  });
});
