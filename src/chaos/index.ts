/** The chaos harness, reusable from tests: `runChaos(options)` returns a report; `verify` checks a run;
 * `runModuleChaos` runs a user's processor module faulted and fault-free and compares the two. */
export { type ModuleChaosOptions, runModuleChaos } from './any-module.js';
export { type Comparison, compare, type Difference, type Snapshot, snapshot } from './compare.js';
export {
  type ChaosOptions,
  type ChaosReport,
  DEFAULTS,
  type FaultOutcome,
  runChaos,
  type UserProcessor,
} from './harness.js';
export {
  type ChaosRandom,
  type ChaosRecord,
  generateInput,
  type InputRecord,
  loadChaosModule,
  readInputFile,
} from './module.js';
export { formatFaults, formatReport, formatSummary } from './report.js';
export { type CrashPointName, type Fault, type FaultKind, makeSchedule, pointsFor } from './schedule.js';
export { type FaultFacts, type Judged, judge, judgeFault } from './verdict.js';
export { type VerifyOptions, type VerifyResult, type Violation, verify } from './verifier.js';
