/**
 * The chaos `repair` fault, short: two instances with the owner-local state on, two rounds of drift (a
 * wrong value under a key's fence, written straight into Redis) each repaired by reconcile --repair's
 * own code while records still flow; the fault must show drift injected and keys repaired, and the
 * verifier must find every key equal to its fold at the end (the owners read the repaired keys again).
 * Plus the verdict on a repair fault's facts, which needs no services.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Fault, formatFaults, formatReport, judgeFault, runChaos } from '../../src/chaos/index.js';
import { DRIFT_TOTAL } from '../../src/chaos/repair.js';
import { foldedOnDrift } from '../../src/chaos/verify-rules.js';
import { parseChaosArgs } from '../../src/cli/chaos.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const brokers = KAFKA_BROKERS.split(',');

describe('chaos repair fault without services', () => {
  const f: Fault = { index: 0, kind: 'repair', at: 0.2, pick: 0, pauseMs: 0 };
  it('a repair fault fails without drift, without a repair, or with keys left', () => {
    const ok = { drifted: 3, repaired: 2, healed: 1, changed: 1, held: 0, unrepaired: 0, attempts: 2 };
    assert.equal(judgeFault(f, ok), undefined);
    assert.match(judgeFault(f, { ...ok, drifted: 0 }) ?? '', /no key drifted/);
    assert.match(judgeFault(f, { ...ok, repaired: 0, healed: 3 }) ?? '', /no drifted key repaired \(3/);
    assert.match(judgeFault(f, { ...ok, unrepaired: 1 }) ?? '', /1 drifted keys neither repaired/);
  });
  it('an output folded on a drifted total is told apart from a wrong one', () => {
    // the flake this rule answers: c-15 read before its repair by a new owner, output with the drift
    assert.equal(foldedOnDrift('{"total":1000708,"count":2}', 705, 2, DRIFT_TOTAL), true);
    assert.equal(foldedOnDrift(`{"total":${705 + 2 * DRIFT_TOTAL},"count":2}`, 705, 2, DRIFT_TOTAL), true);
    assert.equal(foldedOnDrift('{"total":1000709,"count":2}', 705, 2, DRIFT_TOTAL), false, 'not a multiple');
    assert.equal(foldedOnDrift('{"total":1000708,"count":3}', 705, 2, DRIFT_TOTAL), false, 'count wrong');
    assert.equal(foldedOnDrift(`{"total":${705 - DRIFT_TOTAL},"count":2}`, 705, 2, DRIFT_TOTAL), false);
    assert.equal(foldedOnDrift('{"total":705,"count":2}', 705, 2, DRIFT_TOTAL), false, 'no drift');
    assert.equal(foldedOnDrift('{"count":2,"total":1000708}', 705, 2, DRIFT_TOTAL), false, 'bytes differ');
  });
  it('--repairs is an option of the built-in workload', () => {
    assert.equal(parseChaosArgs(['--repairs', '2']).options.repairs, 2);
    assert.throws(() => parseChaosArgs(['--repairs', 'x']), /--repairs must be/);
  });
});

describe('chaos with reconcile --repair during the run', { timeout: 180_000 }, () => {
  it('at-least-once, 2 instances, 2 repair faults: drift repaired, no violation', async () => {
    const report = await runChaos({
      mode: 'at-least-once',
      brokers,
      records: 3000,
      customers: 60,
      partitions: 3,
      durationS: 20,
      poisonRate: 0.01,
      large: 0,
      kills: 0,
      crashes: 0,
      zombies: 0,
      redisRestarts: 0,
      redisFailovers: 0,
      repairs: 2,
      scale: [2],
      sessionTimeoutMs: 6000,
      ...(process.env.CHAOS_SEED ? { seed: Number(process.env.CHAOS_SEED) } : {}),
      drainTimeoutMs: 60_000,
      log: (line) => console.log(`[repair] ${line}`),
    });
    console.log(`${formatReport(report)}\nFaults:\n${formatFaults(report)}`);
    const repairs = report.faults.filter((x) => x.fault.kind === 'repair');
    assert.equal(repairs.length, 2, 'both repair faults ran');
    for (const r of repairs) {
      assert.equal(r.failure, undefined, `#${r.fault.index}: ${r.outcome}`);
      assert.ok((r.facts.drifted ?? 0) > 0, `drift injected: ${r.outcome}`);
      assert.equal(r.facts.unrepaired, 0, `no drifted key left: ${r.outcome}`);
    }
    console.log(`outputs folded on drifted state before its repair: ${report.verify?.driftedOutputs}`);
    const repaired = repairs.reduce((n, r) => n + (r.facts.repaired ?? 0), 0);
    assert.ok(repaired > 0, 'keys repaired');
    assert.deepEqual(report.harnessErrors, []);
    assert.deepEqual(report.unexpectedExits, []);
    assert.deepEqual(report.verify?.violations ?? ['not verified'], [], `seed ${report.seed}`);
    assert.deepEqual(report.failures, [], `seed ${report.seed}`);
  });
});
