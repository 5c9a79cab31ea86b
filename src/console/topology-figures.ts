/**
 * The Topology view's figures of one instance, from the `redfence_topology_*` families its metrics
 * server exposes (a TopologyProcessor given `metrics`, docs/streams.md "Metrics"): per application and
 * node, the records in and out, late and dropped (all reasons) as totals and as rates between two
 * scrapes, and the lag of the repartition topic a node reads. Labels carry application ids and node
 * names only, never keys or values.
 */
import type { MetricSample } from './prom-text.js';

const P = 'redfence_';
export const TOPOLOGY_FAMILIES = {
  in: `${P}topology_records_in_total`,
  out: `${P}topology_records_out_total`,
  late: `${P}topology_late_records_total`,
  dropped: `${P}topology_dropped_records_total`,
  lag: `${P}topology_repartition_lag_records`,
} as const;
type Family = keyof typeof TOPOLOGY_FAMILIES;
const FAMILY_OF = new Map<string, Family>(
  Object.entries(TOPOLOGY_FAMILIES).map(([k, name]) => [name, k as Family]),
);

/** One node's figures in one scrape; `late` and `lag` only where the instance has such a series. */
export interface NodeCounts {
  readonly application: string;
  readonly node: string;
  in: number;
  out: number;
  dropped: number;
  late: number | undefined;
  lag: number | undefined;
}

/** A node's figures: totals from the latest scrape, rates (per second) over the interval, or null. */
export interface NodeFigures extends NodeCounts {
  readonly rates: { in: number; out: number; late: number; dropped: number } | null;
}

const idOf = (application: string, node: string) => `${application}\u0000${node}`;

/** Each node's counts in a scrape, in the order the instance lists them (by application, then node). */
export function nodeCounts(samples: readonly MetricSample[]): Map<string, NodeCounts> {
  const out = new Map<string, NodeCounts>();
  for (const s of samples) {
    const family = FAMILY_OF.get(s.name);
    const application = s.labels.application_id;
    const node = s.labels.topology_node;
    if (family === undefined || application === undefined || node === undefined) continue;
    const id = idOf(application, node);
    let c = out.get(id);
    if (c === undefined) {
      c = { application, node, in: 0, out: 0, dropped: 0, late: undefined, lag: undefined };
      out.set(id, c);
    }
    if (family === 'late' || family === 'lag') c[family] = (c[family] ?? 0) + s.value;
    else c[family] += s.value;
  }
  return out;
}

/**
 * The nodes of the latest scrape with their rates over `seconds` since `before` (null rates with one
 * scrape, or for a node `before` did not have, or whose counters went back: a restarted instance).
 */
export function nodeFigures(
  now: ReadonlyMap<string, NodeCounts>,
  before: ReadonlyMap<string, NodeCounts> | undefined,
  seconds: number | null,
): NodeFigures[] {
  return [...now].map(([id, c]) => {
    const b = before?.get(id);
    if (b === undefined || seconds === null || seconds <= 0) return { ...c, rates: null };
    const d = {
      in: c.in - b.in,
      out: c.out - b.out,
      late: (c.late ?? 0) - (b.late ?? 0),
      dropped: c.dropped - b.dropped,
    };
    if (Object.values(d).some((x) => x < 0)) return { ...c, rates: null };
    return {
      ...c,
      rates: {
        in: d.in / seconds,
        out: d.out / seconds,
        late: d.late / seconds,
        dropped: d.dropped / seconds,
      },
    };
  });
}
