// A test reporter for Node's runner: seconds per test file, slowest first, written when the run ends
// (scripts/test.sh writes one per Node version under .dev/, to see where the suite's time goes).
// Top-level tests and suites only, so nested ones are not counted twice.
export default async function* durations(source) {
  const perFile = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details } = event.data;
    if (nesting !== 0 || file === undefined) continue;
    perFile.set(file, (perFile.get(file) ?? 0) + (details?.duration_ms ?? 0) / 1000);
  }
  const rows = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((s, [, t]) => s + t, 0);
  for (const [file, t] of rows)
    yield `${t.toFixed(1).padStart(8)} s  ${file.replace(`${process.cwd()}/`, '')}\n`;
  yield `${total.toFixed(1).padStart(8)} s  in all (${rows.length} files)\n`;
}
