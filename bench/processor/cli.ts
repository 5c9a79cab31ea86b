/**
 * Running the processor as users do: the built CLI (dist/cli/bin.js) on the package's compiled
 * customer-totals processor (dist/chaos/customer-totals.js, the one `redfence chaos` runs); through tsx
 * from src/ when dist/ is missing (the TypeScript loader's start-up then counts in every figure).
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUILT = `${ROOT}dist/cli/bin.js`;
const MODULE = `${ROOT}dist/chaos/customer-totals.js`;

/** The node arguments that run `redfence` and the processor module for `redfence run`. */
export function customerTotalsCli(): { cli: string[]; module: string; cleanup: () => void } {
  if (!existsSync(BUILT) || !existsSync(MODULE))
    return {
      cli: ['--import', 'tsx', 'src/cli/bin.ts'],
      module: 'src/chaos/customer-totals.ts',
      cleanup: () => {},
    };
  return { cli: [BUILT], module: MODULE, cleanup: () => {} };
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
