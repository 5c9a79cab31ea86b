/**
 * The chaos harness: real Kafka, a Redis of its own (one server, a Sentinel set or a cluster:
 * src/chaos/redis-topology.ts), instances of the package's customer-totals processor as child processes
 * (src/chaos/instances.ts), a skewed workload with poison produced while they run, and a seeded schedule
 * of faults (crash points, SIGKILLs, a zombie, Redis restarts and failovers, scaling; src/chaos/faults.ts
 * and src/chaos/failover.ts). When the input is all produced and every fault has run, it waits for the group
 * to commit the input's end offsets, stops the instances and hands everything to the verifier
 * (src/chaos/verifier.ts); the verdict (src/chaos/verdict.ts) also fails the run for a fault that did
 * not do what it is meant to and for an instance exit no fault caused.
 *
 * With `processor` (a user's module and its input records) the instances run that module instead, the
 * records are produced as given, and instead of the verifier the run's results are read back
 * (src/chaos/compare.ts) for the comparison with a fault-free run (src/chaos/any-module.ts).
 *
 * With `handler` (a handler module: the built-in webhook or a user's) the instances run that handler,
 * which calls a far side the harness starts (src/chaos/far-side.ts); after the drain the far side's calls
 * are judged against the input (src/chaos/handler-run.ts, handler-verdict.ts).
 *
 * With `topology` (a built topology module) the instances run it on the run's own topics (input topics
 * of their own counts with `inputPartitions`; a pattern's topic made mid-run with `lateTopic`, the
 * instances then restarted to read it: src/chaos/late-topic.ts), judged per task against the model.
 *
 * Every wait is a poll or an awaited event with a timeout; the only sleeps are the schedule's pacing
 * (when a fault is due, how long a process stays down). Every child is killed and every topic deleted
 * at the end, whatever happens.
 *
 * This file holds the run's order of steps; the options and the report are src/chaos/run-options.ts,
 * the run's state and its instances src/chaos/run-context.ts, the steps src/chaos/run-steps.ts.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChaosRun } from './run-context.js';
import { type ChaosOptions, type ChaosReport, DEFAULTS } from './run-options.js';
import {
  cleanup,
  drain,
  finish,
  finishProduction,
  killInstances,
  readBack,
  runFaults,
  startInstances,
  startProduction,
  startServices,
  stopInstances,
  sumScrapes,
} from './run-steps.js';
import type { FaultKind } from './schedule.js';

export type { ChaosOptions, ChaosReport, UserHandler, UserProcessor } from './run-options.js';
export { DEFAULTS } from './run-options.js';
export { describeFault } from './run-steps.js';
export type { FaultOutcome } from './verdict.js';

export async function runChaos(
  input: Partial<ChaosOptions> & Pick<ChaosOptions, 'mode' | 'brokers'>,
): Promise<ChaosReport> {
  const run = new ChaosRun({ ...DEFAULTS, ...input });
  run.dir = await mkdtemp(join(tmpdir(), 'redfence-chaos-'));
  let failed: Error | undefined;
  try {
    const faultContext = await startServices(run);
    await startInstances(run);
    const production = startProduction(run);
    await runFaults(run, faultContext, production.startedAt);
    await finishProduction(run, production);
    // a late topic's instances restarted to read it (src/chaos/late-topic.ts)
    await run.pickup;
    await drain(run);
    await stopInstances(run);
  } catch (err) {
    failed = err as Error;
    run.report.harnessErrors.push(`harness: ${(err as Error).stack ?? err}`);
  } finally {
    await killInstances(run);
  }
  sumScrapes(run);
  try {
    if (!failed) await readBack(run);
  } catch (err) {
    run.report.harnessErrors.push(`verifier: ${(err as Error).message}`);
  } finally {
    await cleanup(run);
  }
  return finish(run);
}

export function faultKinds(): readonly FaultKind[] {
  return ['crash', 'kill', 'zombie', 'redis-restart', 'redis-failover', 'scale'];
}
