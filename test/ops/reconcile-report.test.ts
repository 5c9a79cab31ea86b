/** The reconcile report's pieces without services: the progress line only on a TTY, even sampling, the text lines. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Verdict } from '../../src/ops/reconcile.js';
import { progress, reportText, sample } from '../../src/ops/reconcile-report.js';

const range = { partition: 0, start: 0, end: 100, committed: 100 };

describe('reconcile report', () => {
  it('shows progress on a TTY only, and clears it when done', () => {
    const written: string[] = [];
    const tty = { isTTY: true, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream;
    const p = progress(tty);
    p.update(0, 50, range);
    p.done();
    assert.match(written[0] ?? '', /reading partition 0: offset 50 of 100 \(50%\)/);
    assert.equal(written.length, 2);
    const plain: string[] = [];
    const q = progress({
      isTTY: false,
      write: (s: string) => plain.push(s),
    } as unknown as NodeJS.WriteStream);
    q.update(0, 50, range);
    q.done();
    assert.deepEqual(plain, []);
  });

  it('samples evenly and deterministically', () => {
    const v = (i: number): Verdict => ({
      redisKey: `rf:{s:k-${String(i).padStart(3, '0')}}`,
      partition: 0,
      status: 'clean',
      storedOffset: i,
      expectedOffset: i,
    });
    const all = Array.from({ length: 100 }, (_, i) => v(99 - i));
    const picked = sample(all, 4).map((x) => x.storedOffset);
    assert.deepEqual(picked, [0, 25, 50, 75]);
    assert.deepEqual(sample(all, 4), sample([...all].reverse(), 4));
    assert.equal(sample(all, 0).length, 0);
    assert.equal(sample(all.slice(0, 3), 10).length, 3);
  });

  it('prints one line per anomaly starting with its kind, then a summary with counts by kind', () => {
    const text = reportText({
      topic: 't',
      store: 's',
      group: 'g',
      ranges: new Map([[0, range]]),
      records: 100,
      dead: { 'null-key': 0, 'wrong-partition': 1, undecodable: 0, 'processing-error': 0 },
      storedKeys: 2,
      result: {
        anomalies: [{ kind: 'lost-write', key: 'rf:{s:a}', partition: 0, offset: 7, detail: 'd' }],
        cannotJudge: [{ key: 'rf:{s:b}', partition: 0, reason: 'r' }],
        verdicts: [],
      },
      samples: [],
    });
    const lines = text.trimEnd().split('\n');
    assert.equal(lines[0], 'lost-write rf:{s:a} partition=0 offset=7: d');
    assert.equal(lines[1], 'cannot-judge rf:{s:b} partition=0: r');
    assert.match(
      lines[2] ?? '',
      /100 records \(1 dead-lettered\), 2 stored keys, 1 anomalies \(lost-write=1\), 1 cannot be judged$/,
    );
  });
});
