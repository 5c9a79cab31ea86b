/**
 * A tick (src/topology/tick.ts) on Redis, as the reference model takes it: not walked; each windowed
 * aggregation of the sub-topology reading the batch's topic moves its stream time to the tick's
 * timestamp (no window written, so no effect of its own), and with emit('final') the windows that closes
 * become a closing step of the tick, exactly as a record's closes are (final.ts, final-session.ts,
 * final-sliding.ts): `final` effects in the closing windows' own key calls under the tick's offset,
 * fenced and pending like any record's, re-emitted by a replay. The steps name the tick without its
 * headers, so its final results never carry `redfence-tick`.
 */
import type { ModelInput } from '../model.js';
import { tickSource } from '../tick.js';
import { clockOf } from './arrive.js';
import { type FinalRange, finalRange, type WindowClock } from './final.js';
import { sessionFinalRange } from './final-session.js';
import { slidingFinalRange } from './final-sliding.js';
import type { AggregatePlan, RunPlan } from './plan.js';

/** A closing step of a tick (steps.ts' WalkStep has this shape). */
export interface TickCloses {
  readonly closes: AggregatePlan;
  readonly range: FinalRange;
  readonly source: ModelInput;
  /** Sliding windows: the store time at the batch's start (steps.ts' slidingBounded). */
  readonly storeAt?: number;
}

/** Step 1 for a tick: the clocks moved, and a closing step per emit-final aggregation it closes windows of. */
export function tickSteps(plan: RunPlan, tick: ModelInput, clocks: Map<string, WindowClock>): TickCloses[] {
  const source = tickSource(tick);
  const t = tick.timestamp;
  const steps: TickCloses[] = [];
  for (const agg of plan.aggregates.values()) {
    const w = agg.node.window;
    if (w === null || agg.topic !== tick.topic) continue;
    const clock = clockOf(clocks, agg.node.name);
    clock.stream = Math.max(clock.stream, t);
    if (agg.node.emit !== 'final') continue;
    let range: FinalRange | null;
    if (w.kind === 'sliding') {
      // the model checks no final results at a record earlier than d
      if (t < w.timeDifferenceMs) continue;
      range = slidingFinalRange(w, clock, clock.stream - w.graceMs);
      // bounded by the store time where the tick stands (steps.ts' slidingBounded): the walk moves none
      if (range !== null) steps.push({ closes: agg, range, source, storeAt: clock.store });
      continue;
    }
    range =
      w.kind === 'session'
        ? sessionFinalRange(w, clock, clock.stream - w.graceMs - w.inactivityGapMs)
        : finalRange(w, clock, clock.stream - w.graceMs);
    if (range !== null) steps.push({ closes: agg, range, source });
  }
  return steps;
}
