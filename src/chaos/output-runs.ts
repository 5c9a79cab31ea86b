/**
 * How a key's outputs in a topology chaos run compare with the model's (src/chaos/topology-verdict.ts):
 * in order (exactly-once), as runs of contiguous stretches with replays (at-least-once), or as a
 * multiset (outputs from several tasks).
 */

/** One output as compared: its value bytes (hex), timestamp and the task that wrote it. */
export type Out = { value: string; ts: number; task: string };
const same = (a: Out, b: Out) => a.value === b.value && a.ts === b.ts;

/** At-least-once: `actual` as runs of contiguous stretches of `expected`. */
export function replayRuns(expected: readonly Out[], actual: readonly Out[]) {
  const covered = new Array<boolean>(expected.length).fill(false);
  let p = 0; // the next model position of the current run
  let furthest = 0;
  let replays = 0;
  let duplicates = 0;
  const strays: Out[] = [];
  for (const x of actual) {
    if (p < expected.length && same(expected[p] as Out, x)) {
      if (covered[p]) duplicates++;
    } else {
      // a new run: an uncovered place first, else a replay of a covered one (the latest before p)
      let j = expected.findIndex((e, i) => !covered[i] && same(e, x));
      if (j < 0) for (let i = p - 1; i >= 0 && j < 0; i--) if (same(expected[i] as Out, x)) j = i;
      if (j < 0) j = expected.findIndex((e) => same(e, x));
      if (j < 0) {
        strays.push(x);
        continue;
      }
      if (covered[j]) {
        duplicates++;
        if (j < furthest) replays++;
      }
      p = j;
    }
    covered[p] = true;
    p++;
    furthest = Math.max(furthest, p);
  }
  const missing = expected.filter((_, i) => !covered[i]);
  return { replays, duplicates, strays, missing };
}

export function multiset(list: readonly Out[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const o of list) m.set(`${o.value}@${o.ts}`, (m.get(`${o.value}@${o.ts}`) ?? 0) + 1);
  return m;
}

export function firstDifference(a: readonly Out[], b: readonly Out[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const p = a[i];
    const q = b[i];
    if (p === undefined || q === undefined || !same(p, q)) return i;
  }
  return -1;
}
