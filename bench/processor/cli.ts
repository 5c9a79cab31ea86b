/**
 * Running the processor as users do: the built CLI (dist/cli/bin.js) on a JavaScript module holding
 * examples/customer-totals.ts's processor; through tsx from src/ when dist/ is missing (the TypeScript
 * loader's start-up then counts in every figure).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUILT = `${ROOT}dist/cli/bin.js`;

/** The node arguments that run `redfence` and the processor module for `redfence run`; `cleanup` removes it. */
export function customerTotalsCli(): { cli: string[]; module: string; cleanup: () => void } {
  if (!existsSync(BUILT))
    return {
      cli: ['--import', 'tsx', 'src/cli/bin.ts'],
      module: 'examples/customer-totals.ts',
      cleanup: () => {},
    };
  const module = join(tmpdir(), `redfence-bench-${process.pid}.mjs`);
  writeFileSync(
    module,
    `import { defineProcessor } from ${JSON.stringify(pathToFileURL(`${ROOT}dist/index.js`).href)};
export default defineProcessor({
  input: process.env.ORDERS_TOPIC, output: process.env.TOTALS_TOPIC, store: process.env.TOTALS_STORE,
  decode: (value) => {
    const order = JSON.parse(value?.toString('utf8') ?? '');
    if (typeof order.amount !== 'number' || !Number.isInteger(order.amount)) throw new TypeError('amount must be an integer');
    return order;
  },
  reduce: (state, order) => ({ state: { total: (state?.total ?? 0) + order.amount, count: (state?.count ?? 0) + 1 } }),
});
`,
  );
  return { cli: [BUILT], module, cleanup: () => rmSync(module, { force: true }) };
}

/** Peak resident set size of a live process, bytes (Linux VmHWM); NaN when unreadable. */
export function peakRss(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
