/**
 * `redfence chaos <module>`: two runs of a user's processor over the same input records. First the
 * reference: one instance, no fault, its own topics, store, group and redis-server. Then the faulted run
 * with the options' schedule (crash points, kills, zombies, Redis restarts and failovers, scaling), also
 * on its own topics, store, group and redis-server. Each run's results are read back and compared key by
 * key (src/chaos/compare.ts); the faulted run's report carries the comparison, and its verdict fails on any
 * difference, on anything that fails a run (a fault not as expected, an exit no fault caused, a harness
 * error), and on anything that failed the reference run.
 */
import { compare } from './compare.js';
import { type ChaosOptions, type ChaosReport, runChaos, type UserProcessor } from './harness.js';
import { judge } from './verdict.js';

/** The options of the fault-free reference run: one instance, nothing injected, the records at once. */
function referenceOptions(o: ModuleChaosOptions): ModuleChaosOptions {
  return {
    ...o,
    label: 'ref',
    scale: [1],
    kills: 0,
    crashes: 0,
    zombies: 0,
    redisRestarts: 0,
    redisFailovers: 0,
    redisTopology: 'standalone',
    durationS: 0.1,
  };
}

export type ModuleChaosOptions = Partial<ChaosOptions> &
  Pick<ChaosOptions, 'mode' | 'brokers'> & { processor: UserProcessor };

/** Runs the reference and the faulted run and returns the faulted run's report, compared. */
export async function runModuleChaos(o: ModuleChaosOptions): Promise<ChaosReport> {
  const log = o.log;
  log?.(`reference run: ${o.processor.module}, ${o.processor.records.length} records, no faults`);
  const reference = await runChaos(referenceOptions(o));
  // a reference run that could not be read back has nothing to compare with: it is the report
  if (!reference.snapshot) return reference;
  log?.(
    `reference run done in ${reference.totalSeconds.toFixed(1)} s; the faulted run, same seed ${reference.seed}`,
  );
  const faulted = await runChaos({ ...o, seed: reference.seed });
  faulted.reference = {
    names: reference.names,
    totalSeconds: reference.totalSeconds,
    failures: reference.failures,
  };
  if (faulted.snapshot) faulted.comparison = compare(o.mode, reference.snapshot, faulted.snapshot);
  else if (!faulted.snapshot) faulted.harnessErrors.push('the faulted run was not read back');
  faulted.failures = judge(faulted);
  faulted.ok = faulted.failures.length === 0;
  return faulted;
}
