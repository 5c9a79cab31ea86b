/**
 * Small hand-made scenarios whose Kafka Streams outputs test/topology/kstreams.test.ts pins by hand
 * (window bounds, a late record at the boundary, a session bridge, a final result skipped past the
 * store's retention), also run by run-equals-kstreams.test.ts on TopologyProcessor. One partition each.
 */
import { type InRecord, type Scenario, START_MS as T } from './scenarios.js';

const rec = (key: string | null, timestamp: number, amount = 1): InRecord => ({
  partition: 0,
  key,
  amount,
  timestamp,
});
const one = (name: string, over: Partial<Scenario>): Scenario => ({
  name,
  window: null,
  aggregate: 'count',
  emit: 'update',
  partitions: 1,
  ...over,
});
/** Three records of a in [T, T+10 s) out of order, b moving stream time to T+20 s - 1 ms, then a late a. */
const tumblingInput = [
  rec('a', T + 1000),
  rec('a', T + 3000),
  rec('a', T + 2000),
  rec('b', T + 19_999),
  rec('a', T + 500),
];
const tumbling = { kind: 'tumbling', sizeMs: 10_000, graceMs: 2000 } as const;
const session = { kind: 'session', inactivityGapMs: 5000, graceMs: 10_000 } as const;
/** Two sessions of a 8 s apart, then a record 4 s after the first one bridges them. */
const bridge = [rec('a', T), rec('a', T + 8000), rec('a', T + 4000)];

export const PINNED: { scenario: Scenario; input: InRecord[] }[] = [
  { scenario: one('pin-tumbling-update', { window: tumbling }), input: tumblingInput },
  { scenario: one('pin-tumbling-final', { window: tumbling, emit: 'final' }), input: tumblingInput },
  /** b closes a's window but its own window starts size + grace after a's: past the store's retention. */
  {
    scenario: one('pin-tumbling-final-jump', { window: tumbling, emit: 'final' }),
    input: [rec('a', T + 1000), rec('b', T + 21_000)],
  },
  /** The same for a session: b closes a's session long after the store's retention (gap + grace) of it. */
  {
    scenario: one('pin-session-final-jump', {
      window: { kind: 'session', inactivityGapMs: 5000, graceMs: 1000 },
      emit: 'final',
    }),
    input: [rec('a', T + 1000), rec('b', T + 100_000)],
  },
  /** Late exactly at the boundary: window end == stream time - grace (Kafka Streams: late). */
  {
    scenario: one('pin-tumbling-boundary', { window: tumbling }),
    input: [rec('a', T + 1000), rec('b', T + 12_000), rec('a', T + 500), rec('a', T + 10_001)],
  },
  /** Sliding windows are late only when end < stream time - grace: T+25 s is in, T+25 s - 1 ms is not. */
  {
    scenario: one('pin-sliding-boundary', {
      window: { kind: 'sliding', timeDifferenceMs: 5000, graceMs: 10_000 },
    }),
    input: [rec('a', T + 20_000), rec('b', T + 35_000), rec('a', T + 25_000), rec('a', T + 24_999)],
  },
  { scenario: one('pin-session-update', { window: session }), input: bridge },
  {
    scenario: one('pin-session-final', { window: session, emit: 'final' }),
    input: [...bridge, rec('b', T + 30_000)],
  },
  {
    scenario: one('pin-hopping-sum', {
      window: { kind: 'hopping', sizeMs: 10_000, advanceMs: 5000, graceMs: 0 },
      aggregate: 'sum',
    }),
    input: [rec('a', T + 7000, 4)],
  },
  {
    scenario: one('pin-sliding-update', {
      window: { kind: 'sliding', timeDifferenceMs: 5000, graceMs: 10_000 },
    }),
    input: [rec('a', T + 10_000), rec('a', T + 12_000)],
  },
  {
    scenario: one('pin-table-sum', { aggregate: 'sum' }),
    input: [rec('a', T, 5), rec(null, T + 1, 100), rec('a', T + 2, 7), rec('b', T + 3, 1)],
  },
  {
    scenario: one('pin-fraud', { window: tumbling, minAmount: 50, minCount: 1 }),
    input: [rec('a', T + 1, 60), rec('a', T + 2, 40), rec('a', T + 3, 70), rec('a', T + 4, 80)],
  },
];
