// The rooms of src/ and the arrows between them, read from the TypeScript imports (static `import` /
// `export ... from` and `import('...')` with a literal path; type-only imports count too: a type ties
// two rooms as surely as a value does). A room is a folder directly under src/ (src/index.ts and
// src/version.ts are rooms of their own). Prints every arrow that runs back up a floor (an import from a
// room to one on the same or a higher floor of FLOORS) and every import circle between files.
//
//   node scripts/import-graph.mjs          arrows per room pair, back-arrows, circles; exit 1 if any
//
// test/checks/import-graph.test.ts runs the same analysis and fails on a circle or a back-arrow.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The floors, top first: data flows one way, from a room to rooms on lower floors only
 * (docs/architecture.md, "Rooms"). A room may import any room on a lower floor, none on its own or above.
 */
export const FLOORS = [
  ['cli'],
  ['chaos', 'console'],
  ['loader'],
  ['index.ts'],
  ['kit-entry'],
  ['ops'],
  ['invalidation'],
  ['processor', 'handler', 'outbox', 'testing'],
  ['definition', 'topology'],
  ['retry'],
  ['dead-letter', 'runtime'],
  ['telemetry'],
  ['kit', 'kafka', 'store'],
  ['fence', 'metrics'],
  ['options', 'keys', 'partitioner', 'harness'],
  ['errors', 'version.ts'],
];

const here = dirname(fileURLToPath(import.meta.url));
const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*'([^']+)'|import\(\s*'([^']+)'\s*\)|^import\s+'([^']+)'/gm;

function sourceFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The room of a file (a path relative to src/). kit/index.ts is the kit's entry point, above the runtimes. */
export function roomOf(file) {
  if (file === 'kit/index.ts') return 'kit-entry';
  const slash = file.indexOf('/');
  return slash < 0 ? file : file.slice(0, slash);
}

/** Every file of src/ (relative paths) with the files of src/ it imports. */
export function readImports(root = resolve(here, '..')) {
  const src = join(root, 'src');
  const graph = new Map();
  for (const path of sourceFiles(src)) {
    const text = readFileSync(path, 'utf8');
    const targets = new Set();
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3];
      if (!spec?.startsWith('.')) continue;
      const target = relative(src, resolve(dirname(path), spec)).replace(/\.js$/, '.ts');
      targets.add(target.endsWith('.ts') ? target : `${target}.ts`);
    }
    graph.set(relative(src, path), targets);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan), each a circle of imports. */
export function circles(graph) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) found.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

/** Arrows between rooms (`from -> to` with the importing file and the imported one). */
export function roomArrows(graph) {
  const arrows = [];
  for (const [file, targets] of graph)
    for (const target of targets) {
      const from = roomOf(file);
      const to = roomOf(target);
      if (from !== to) arrows.push({ from, to, file, target });
    }
  return arrows;
}

/** The arrows that do not run down a floor, and the rooms missing from FLOORS. */
export function backArrows(graph) {
  const floor = new Map(FLOORS.flatMap((rooms, i) => rooms.map((r) => [r, i])));
  const unplaced = new Set();
  const back = [];
  for (const a of roomArrows(graph)) {
    for (const r of [a.from, a.to]) if (!floor.has(r)) unplaced.add(r);
    if (floor.has(a.from) && floor.has(a.to) && floor.get(a.from) >= floor.get(a.to)) back.push(a);
  }
  return { back, unplaced: [...unplaced].sort() };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const graph = readImports();
  const counts = new Map();
  for (const a of roomArrows(graph)) {
    const k = `${a.from} -> ${a.to}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  console.log('arrows between rooms (imports):');
  for (const [k, n] of [...counts].sort()) console.log(`  ${k}  ${n}`);
  const { back, unplaced } = backArrows(graph);
  const found = circles(graph);
  console.log(`rooms without a floor: ${unplaced.length === 0 ? 'none' : unplaced.join(', ')}`);
  console.log(`arrows that run back up: ${back.length}`);
  for (const a of back) console.log(`  ${a.from} -> ${a.to}: src/${a.file} imports src/${a.target}`);
  console.log(`import circles: ${found.length}`);
  for (const c of found) console.log(`  ${c.map((f) => `src/${f}`).join(' <-> ')}`);
  process.exitCode = back.length + found.length + unplaced.length === 0 ? 0 : 1;
}
