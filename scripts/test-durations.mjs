// A test reporter for Node's runner: seconds and test cases per test file, slowest first, written when
// the run ends (scripts/test.sh writes one per Node version and pass under .dev/, to see where the
// suite's time goes and to compare the number of cases between runs file by file).
// Seconds: top-level tests and suites only, so nested ones are not counted twice. Cases: the tests that
// are not suites, at any depth (what the runner's own "tests" total counts).
export default async function* durations(source) {
  const perFile = new Map();
  const entry = (file) => {
    const found = perFile.get(file);
    if (found !== undefined) return found;
    const e = { seconds: 0, cases: 0 };
    perFile.set(file, e);
    return e;
  };
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details } = event.data;
    if (file === undefined) continue;
    const e = entry(file);
    if (details?.type !== 'suite') e.cases += 1;
    if (nesting === 0) e.seconds += (details?.duration_ms ?? 0) / 1000;
  }
  const rows = [...perFile].sort((a, b) => b[1].seconds - a[1].seconds);
  const seconds = rows.reduce((s, [, e]) => s + e.seconds, 0);
  const cases = rows.reduce((s, [, e]) => s + e.cases, 0);
  for (const [file, e] of rows)
    yield `${e.seconds.toFixed(1).padStart(8)} s  ${file.replace(`${process.cwd()}/`, '')}  (${e.cases} tests)\n`;
  yield `${seconds.toFixed(1).padStart(8)} s  in all (${rows.length} files, ${cases} tests)\n`;
}
