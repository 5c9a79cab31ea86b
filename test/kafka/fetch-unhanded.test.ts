/**
 * unhanded(): what a partition still has to hand over, from the records a pause held and the fetched
 * ones, never anything below the first offset not handed over and never a record twice (librdkafka
 * can take a record off its queue twice when a pause lands while a consume call takes it).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RdKafka } from '@confluentinc/kafka-javascript';
import { unhanded } from '../../src/kafka/fetch.js';

const msgs = (...offsets: number[]) =>
  offsets.map((offset) => ({ topic: 't', partition: 0, offset }) as RdKafka.Message);
const offsets = (l: RdKafka.Message[]) => l.map((m) => m.offset);

describe('unhanded', () => {
  it('hands the held records first, then the fetched ones', () => {
    assert.deepEqual(offsets(unhanded(msgs(5, 6), msgs(7, 8), 5)), [5, 6, 7, 8]);
  });
  it('drops what is below the first offset not handed over', () => {
    assert.deepEqual(offsets(unhanded(undefined, msgs(3, 4, 5, 6), 5)), [5, 6]);
  });
  it('drops a record fetched again after the held ones, keeps gaps (compaction, markers)', () => {
    assert.deepEqual(offsets(unhanded(msgs(5, 6), msgs(6, 7, 9), -1)), [5, 6, 7, 9]);
  });
  it('with nothing known, keeps everything', () => {
    assert.deepEqual(offsets(unhanded(undefined, msgs(0, 1), -1)), [0, 1]);
  });
});
