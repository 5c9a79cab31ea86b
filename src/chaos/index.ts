/** The chaos harness, reusable from tests: `runChaos(options)` returns a report; `verify` checks a run. */
export { type ChaosOptions, type ChaosReport, DEFAULTS, type FaultOutcome, runChaos } from './harness.js';
export { formatFaults, formatReport, formatSummary } from './report.js';
export { type CrashPointName, type Fault, type FaultKind, makeSchedule, pointsFor } from './schedule.js';
export { type FaultFacts, type Judged, judge, judgeFault } from './verdict.js';
export { type VerifyOptions, type VerifyResult, type Violation, verify } from './verifier.js';
