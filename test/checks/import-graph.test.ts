/**
 * The one-way flow of src/ (docs/architecture.md, "Rooms"): no import runs back up a floor of
 * scripts/import-graph.mjs's FLOORS, no room is left off them, and no files import each other in a
 * circle. The analysis itself is checked on a planted graph, so a checker that finds nothing fails here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
// @ts-expect-error: a plain .mjs script without types
import { backArrows, circles, readImports } from '../../scripts/import-graph.mjs';

type Graph = Map<string, Set<string>>;
interface Arrow {
  from: string;
  to: string;
  file: string;
  target: string;
}

describe('import graph of src/', () => {
  const graph = readImports() as Graph;

  it('reads the imports of every room', () => {
    assert.ok(graph.size > 100, `read ${graph.size} files`);
    assert.ok(graph.get('processor/processor.ts')?.has('runtime/logger.ts'));
  });

  it('has no arrow running back up a floor and every room on a floor', () => {
    const { back, unplaced } = backArrows(graph) as { back: Arrow[]; unplaced: string[] };
    assert.deepEqual(unplaced, [], 'rooms missing from FLOORS in scripts/import-graph.mjs');
    assert.deepEqual(
      back.map((a) => `${a.from} -> ${a.to}: src/${a.file} imports src/${a.target}`),
      [],
    );
  });

  it('has no import circle', () => {
    assert.deepEqual(circles(graph), []);
  });

  it('finds a planted circle and a planted upward arrow', () => {
    const planted: Graph = new Map([
      ['kafka/a.ts', new Set(['kafka/b.ts'])],
      ['kafka/b.ts', new Set(['processor/c.ts'])],
      ['processor/c.ts', new Set(['kafka/a.ts'])],
    ]);
    assert.deepEqual(circles(planted), [['kafka/a.ts', 'kafka/b.ts', 'processor/c.ts']]);
    const { back } = backArrows(planted) as { back: Arrow[] };
    assert.deepEqual(
      back.map((a) => `${a.from} -> ${a.to}`),
      ['kafka -> processor'],
    );
  });
});
