/**
 * bench/topology/failover.ts's topology for `redfence run` (plain JavaScript over the built package, so
 * the replacement's start-up carries no TypeScript loader): bench/topology/run.ts's windowed count,
 * orders -> groupByKey -> tumbling windows -> count -> toStream -> (customer, {start, end, count}).
 * Env: TOPO_APP (applicationId: group and Redis prefix), TOPO_INPUT, TOPO_OUTPUT, TOPO_WINDOW_MS,
 * TOPO_GRACE_MS.
 */
import { serdes, TimeWindows, topology } from '../../dist/index.js';

const env = (name) => {
  const v = process.env[name];
  if (v === undefined || v === '') throw new Error(`${name} is not set`);
  return v;
};

const t = topology({ applicationId: env('TOPO_APP') });
t.stream(env('TOPO_INPUT'), { key: serdes.string() })
  .groupByKey()
  .windowedBy(TimeWindows.ofSizeAndGrace(Number(env('TOPO_WINDOW_MS')), Number(env('TOPO_GRACE_MS'))))
  .count({ name: 'counts' })
  .toStream()
  .map((w, n) => [w.key, { start: w.start, end: w.end, count: n }])
  .to(env('TOPO_OUTPUT'), { key: serdes.string() });

export default t.build();
