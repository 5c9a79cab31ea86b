// A test reporter for Node's runner: one line per failed test (file, test name, first lines of its
// error), written as the run goes. scripts/test.sh prints every pass's file again after the last pass,
// so the end of a long run's output names what failed even when the earlier output is cut off.
export default async function* failures(source) {
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { file, name, nesting, details } = event.data;
    // a suite fails when one of its tests does: its own line adds nothing; a todo test's failure is
    // expected (it states a known gap) and fails no run
    if (details?.type === 'suite' || event.data.todo !== undefined) continue;
    const where = file === undefined ? '?' : file.replace(`${process.cwd()}/`, '');
    const cause = details?.error?.cause ?? details?.error;
    // the first lines of the message (an assertion's first line alone only says "not equal")
    const first = String(cause?.message ?? cause ?? '')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '')
      .slice(0, 4)
      .join(' / ')
      .slice(0, 300);
    yield `${where}: ${'  '.repeat(nesting)}${name}${first ? ` -- ${first}` : ''}\n`;
  }
}
