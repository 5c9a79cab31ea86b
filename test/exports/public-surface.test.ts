/**
 * The public surface is deliberate: every export of every entry point in package.json "exports" is named
 * in README.md or docs/*.md; every project type a public signature uses can be named by a user (some
 * entry point exports it); no public class field exposes a type users cannot name. The same checks run on
 * a small fixture package with one fault of each kind, to show that each of them fails.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { docText, entryPoints, isDocumented, programOf, Surface } from './surface.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURE = path.join(ROOT, 'test/exports/fixtures/package');

const program = programOf([...entryPoints(ROOT), ...entryPoints(FIXTURE)].map((e) => e.file));

const show = (xs: Array<{ name: string; file: string; via: string }>) =>
  xs.map((h) => `${h.name} (${h.file}) reached from ${h.via}`);

describe('the public surface of redfence', () => {
  let surface: Surface;
  before(() => {
    surface = new Surface(program, ROOT, entryPoints(ROOT));
  });

  it('every runtime export of every entry point is seen by the compiler too', async () => {
    for (const e of entryPoints(ROOT)) {
      const mod = (await import(e.file)) as Record<string, unknown>;
      const values = new Set(
        surface.exports.filter((x) => x.subpath === e.subpath && x.isValue).map((x) => x.name),
      );
      const runtime: string[] = [];
      for (const [k, v] of Object.entries(mod)) {
        runtime.push(k);
        // a namespace object (`outbox`): its members are exports too
        if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === null) {
          for (const m of Object.keys(v)) runtime.push(`${k}.${m}`);
        }
      }
      assert.deepEqual(
        runtime.filter((n) => !values.has(n)),
        [],
        `${e.subpath}: runtime exports the compiler missed`,
      );
      assert.ok(runtime.length > 0, `${e.subpath} exports nothing at run time`);
    }
  });

  it('every export (values and types) is named in README.md or docs/*.md', () => {
    const docs = docText(ROOT);
    const missing = surface.exports
      .filter((e) => !isDocumented(e.name, docs))
      .map((e) => `${e.subpath === '.' ? 'redfence' : `redfence/${e.subpath.slice(2)}`}: ${e.name}`);
    assert.deepEqual(missing, [], 'exported but named nowhere in README.md or docs/*.md');
  });

  it('every project type used by a public signature is exported by some entry point', () => {
    assert.deepEqual(show(surface.hiddenTypes()), [], 'public signatures use types users cannot name');
  });

  it('members tagged @internal (exempt above) are left out of the published declarations', () => {
    const build = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8'));
    assert.equal(build.compilerOptions.stripInternal, true);
  });

  it('no public class field has a type users cannot name', () => {
    const fields = surface
      .exposingFields()
      .map((f) => `${f.field}: ${f.hidden.map((h) => h.name).join(', ')}`);
    assert.deepEqual(fields, [], 'make these fields private (#) or type them with exported types');
  });
});

describe('the surface checks on a fixture with one fault of each kind', () => {
  let surface: Surface;
  before(() => {
    surface = new Surface(program, FIXTURE, entryPoints(FIXTURE));
  });

  it('finds the export the docs never name, and only it', () => {
    const docs = docText(FIXTURE);
    const names = surface.exports.map((e) => e.name).sort();
    assert.deepEqual(names, ['Widget', 'WidgetOptions', 'makeWidget', 'undocumented']);
    assert.deepEqual(
      names.filter((n) => !isDocumented(n, docs)),
      ['undocumented'],
    );
  });

  it('finds the unexported types of public signatures, with the path that reaches them', () => {
    const hidden = surface.hiddenTypes();
    assert.deepEqual(show(hidden).sort(), [
      'Colour (src/internal.ts) reached from WidgetOptions.colour',
      'Gear (src/internal.ts) reached from Widget.gear',
      'Part (src/internal.ts) reached from makeWidget > Spec.parts',
      'Spec (src/internal.ts) reached from makeWidget',
    ]);
  });

  it('finds the public field typed with an internal type, not the private ones', () => {
    const fields = surface
      .exposingFields()
      .map((f) => `${f.field}: ${f.hidden.map((h) => h.name).join(', ')}`);
    assert.deepEqual(fields, ['Widget.gear: Gear']);
  });
});
