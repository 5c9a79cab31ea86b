/**
 * The verdict of a chaos run. Every fault records what it observed (facts); `judgeFault` compares them
 * with what the fault is meant to do, and `judge` fails a run for any fault that did not do it, a
 * scheduled fault that never ran, an instance exit the harness did not cause, a harness error, a run
 * that was not verified, or a violation the verifier found. A run is OK only with no such failure.
 */
import type { Exit } from '../harness/child.js';
import type { Comparison } from './compare.js';
import type { Fault } from './schedule.js';
import type { VerifyResult } from './verifier.js';

/** What a fault observed; each kind fills the fields it is judged on. */
export interface FaultFacts {
  /** The fault could not be carried out (thrown): why. */
  error?: string;
  /** The fault was not attempted: why. */
  skipped?: string;
  /** kill, crash: the target's exit (undefined: it did not exit). */
  exit?: Exit;
  /** kill, crash, and a zombie that died: a replacement started and logged `processor started`. */
  restarted?: boolean;
  /** zombie: another instance was assigned partitions while it was stopped. */
  partitionsMoved?: boolean;
  /** zombie: what it did after SIGCONT (silent: nothing logged within the bound). */
  woke?: 'fenced' | 'rebalanced' | 'exited' | 'silent';
  /** redis-restart, redis-failover: the server was running and died of the harness's SIGKILL. */
  serverKilled?: boolean;
  /** redis-restart: it answers again; redis-failover: the old primary is back as a replica. */
  serverBack?: boolean;
  /** redis-restart: instances that logged the outage, and how many of them logged resuming. */
  paused?: number;
  resumed?: number;
  /** redis-failover: the replica accepted `REPLICAOF NO ONE`. */
  promoted?: boolean;
  /** scale: live instances afterwards. */
  instances?: number;
  /** scale (down): every instance it stopped exited 0 after SIGTERM. */
  stoppedCleanly?: boolean;
  /** repair: keys given a wrong value under their fence, and what became of them (src/chaos/repair.ts). */
  drifted?: number;
  /** repair: drifted keys rewritten by reconcile --repair's script. */
  repaired?: number;
  /** repair: answers `changed` (the owner wrote the key between reconcile's read and the write), retried. */
  changed?: number;
  /** repair: drifted keys their owner rewrote from its cached state before a repair reached them. */
  healed?: number;
  /** repair: plans held back because the owner had applied the key above the committed offset. */
  held?: number;
  /** repair: drifted keys neither repaired nor healed after every round. */
  unrepaired?: number;
  attempts?: number;
  /** repair: repaired keys their owner wrote again afterwards (within a bound; not judged). */
  rewritten?: number;
}

/** What injecting one fault returns (src/chaos/faults.ts, failover.ts): the harness adds the rest. */
export interface Injected {
  target?: string;
  outcome: string;
  facts: FaultFacts;
}

export interface FaultOutcome {
  fault: Fault;
  target?: string;
  /** For people: what happened. */
  outcome: string;
  facts: FaultFacts;
  /** Why the fault did not do what it is meant to; undefined when it did. */
  failure?: string;
  startedAt: number;
  tookMs: number;
}

const show = (e: Exit | undefined) => (e ? `code ${e.code}, signal ${e.signal}` : 'no exit');

/** Why a fault's facts fall short of its purpose; undefined when they do not. */
export function judgeFault(f: Fault, x: FaultFacts): string | undefined {
  if (x.error !== undefined) return `could not be carried out: ${x.error}`;
  if (x.skipped !== undefined) return `not attempted: ${x.skipped}`;
  switch (f.kind) {
    case 'kill':
      if (x.exit?.signal !== 'SIGKILL') return `the target did not die of the SIGKILL (${show(x.exit)})`;
      if (x.restarted !== true) return 'the replacement did not start';
      return undefined;
    case 'crash':
      if (x.exit === undefined) return `crash point ${f.point} not reached`;
      if (x.exit.signal !== 'SIGKILL') return `exited before reaching ${f.point} (${show(x.exit)})`;
      if (x.restarted !== true) return 'the replacement did not start';
      return undefined;
    case 'zombie':
      if (x.partitionsMoved !== true) return 'its partitions did not move while it was stopped';
      if (x.woke === undefined || x.woke === 'silent')
        return 'woke, logged no FENCE, revocation or assignment';
      if (x.woke === 'exited' && x.restarted !== true) return 'died after waking and was not restarted';
      return undefined;
    case 'redis-restart':
      if (x.serverKilled !== true) return 'Redis was not running when it was to be killed';
      if (x.serverBack !== true) return 'Redis did not come back';
      if ((x.resumed ?? 0) < (x.paused ?? 0))
        return `${(x.paused ?? 0) - (x.resumed ?? 0)} of ${x.paused} paused instances did not resume`;
      return undefined;
    case 'redis-failover':
      if (x.serverKilled !== true) return 'the primary was not running when it was to be killed';
      if (x.promoted !== true) return 'the replica was not promoted';
      if (x.serverBack !== true) return 'the old primary did not come back as a replica';
      return undefined;
    case 'scale':
      if (x.instances !== f.to) return `${x.instances ?? 0} live instances, not ${f.to}`;
      if (x.stoppedCleanly === false) return 'an instance it stopped did not exit 0 after SIGTERM';
      return undefined;
    case 'repair':
      if ((x.drifted ?? 0) === 0) return 'no key drifted';
      if ((x.unrepaired ?? 0) > 0)
        return `${x.unrepaired} drifted keys neither repaired nor rewritten by their owner after ${x.attempts} rounds`;
      if ((x.repaired ?? 0) === 0)
        return `no drifted key repaired (${x.healed ?? 0} rewritten by their owner first)`;
      return undefined;
  }
}

/** What `judge` reads of a report. */
export interface Judged {
  schedule: readonly Fault[];
  faults: readonly FaultOutcome[];
  unexpectedExits: readonly string[];
  harnessErrors: readonly string[];
  verify: Pick<VerifyResult, 'violations'> | undefined;
  /** A user's processor: the comparison with its fault-free run, checked instead of the verifier's. */
  comparison?: Pick<Comparison, 'counts' | 'keysDiffering'>;
  /** A user's processor: its results were read back (the comparison comes after). */
  snapshot?: unknown;
  /** A user's processor: why its fault-free run failed (each fails this run too). */
  reference?: { failures: readonly string[] };
  /** A handler run: the far side's calls judged (src/chaos/handler-verdict.ts), instead of the verifier. */
  handler?: { violations: readonly unknown[]; counts: ReadonlyMap<string, number> };
  /** A topology run: its outputs and dead letters judged against the model (src/chaos/topology-verdict.ts). */
  topology?: { counts: ReadonlyMap<string, number>; keysDiffering: number };
  /** What a topology run judges, when it is one (a run not judged fails). */
  options?: { topology?: unknown };
}

/** Every reason the run fails; empty: the run is OK. */
export function judge(r: Judged): string[] {
  const failures: string[] = [];
  const ran = new Set(r.faults.map((f) => f.fault.index));
  for (const f of r.schedule) if (!ran.has(f.index)) failures.push(`fault #${f.index} ${f.kind}: never ran`);
  for (const f of r.faults) {
    const why = judgeFault(f.fault, f.facts);
    if (why !== undefined) failures.push(`fault #${f.fault.index} ${f.fault.kind}: ${why}`);
  }
  for (const e of r.unexpectedExits)
    failures.push(`instance exit not caused by a fault: ${e.split('\n')[0]}`);
  for (const e of r.harnessErrors) failures.push(`harness: ${e.split('\n')[0]}`);
  for (const f of r.reference?.failures ?? []) failures.push(`reference run: ${f}`);
  if (r.comparison !== undefined) {
    const n = [...r.comparison.counts.values()].reduce((a, b) => a + b, 0);
    if (n > 0) failures.push(`${n} differences from the fault-free run (${r.comparison.keysDiffering} keys)`);
  } else if (r.topology !== undefined) {
    const n = [...r.topology.counts.values()].reduce((x, y) => x + y, 0);
    if (n > 0)
      failures.push(
        `${n} differences from the model (${[...r.topology.counts].map(([k, x]) => `${k} ${x}`).join(', ')}; ${r.topology.keysDiffering} output keys)`,
      );
  } else if (r.options?.topology !== undefined) failures.push('not judged against the model');
  else if (r.handler !== undefined) {
    const n = [...r.handler.counts.values()].reduce((x, y) => x + y, 0);
    if (n > 0)
      failures.push(`${n} violations (${[...r.handler.counts].map(([k, x]) => `${k} ${x}`).join(', ')})`);
  } else if (r.verify === undefined && r.snapshot === undefined) failures.push('not verified');
  else if (r.verify !== undefined && r.verify.violations.length > 0)
    failures.push(`${r.verify.violations.length} violations`);
  return failures;
}
