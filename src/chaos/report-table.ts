/** The chaos report's plain-text tables and number format (src/chaos/report.ts, report-topology.ts). */

/** A two-column table under its title. */
export function table(title: string, rows: Array<[string, string | number]>): string {
  const w = Math.max(...rows.map(([k]) => k.length), 10);
  const v = Math.max(...rows.map(([, x]) => String(x).length), 5);
  const line = `+-${'-'.repeat(w)}-+-${'-'.repeat(v)}-+`;
  return [title, line, ...rows.map(([k, x]) => `| ${k.padEnd(w)} | ${String(x).padStart(v)} |`), line].join(
    '\n',
  );
}

/** A count with thousands separators; '-' for none. */
export const n = (x: number | undefined) => (x === undefined ? '-' : x.toLocaleString('en-US'));
