/**
 * Loads the module given to `redfence run` (a processor, a handler, an invalidation or a built
 * topology): `.js`, `.mjs`, `.cjs` through Node alone;
 * `.ts`, `.mts`, `.cts` through tsx, registered only then.
 *
 * Why tsx rather than Node's own type stripping: Node 20 cannot run TypeScript at all, Node 22 only
 * from 22.18 (earlier behind a flag), and where Node strips types it takes erasable syntax only (no
 * `enum`, `namespace` or parameter properties) and wants `.ts` in relative imports. tsx (esbuild) gives
 * one behaviour on every Node this package supports: any TypeScript syntax, `./x.js` finding `./x.ts`,
 * tsconfig paths, and ESM or CommonJS as the module's package.json "type" says. Both of its hooks are
 * registered (ESM and CommonJS), since a `.ts` file in a package without `"type": "module"` is compiled
 * to CommonJS and `require`s what it imports.
 */
import { existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { InvalidationDefinition } from '../definition/invalidation.js';
import { RedfenceError } from '../errors/index.js';
import type { BuiltTopology, HandlerDefinition, ProcessorDefinition } from '../index.js';
import { isBuiltTopology } from '../topology/build.js';

export { isBuiltTopology };

const TYPESCRIPT = ['.ts', '.mts', '.cts'];
const JAVASCRIPT = ['.js', '.mjs', '.cjs'];

let typescript: Promise<void> | undefined;
function registerTypeScript(): Promise<void> {
  typescript ??= (async () => {
    const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
    esm.register();
    cjs.register();
  })();
  return typescript;
}

const oneLine = (err: unknown) =>
  (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ').trim();

function bad(message: string, cause?: unknown): RedfenceError {
  return new RedfenceError('RF_MODULE_INVALID', message, cause === undefined ? {} : { cause });
}

/** The export holding the definition: `default`, else `processor` or `handler`; CommonJS output is looked into too. */
function pick(mod: Record<string, unknown>): unknown {
  const top = mod.default ?? mod.processor ?? mod.handler;
  if (typeof top === 'object' && top !== null && !('input' in top)) {
    // A CommonJS module (e.g. TypeScript compiled to CommonJS) arrives as { default: module.exports }.
    const inner = top as Record<string, unknown>;
    return inner.default ?? inner.processor ?? inner.handler ?? top;
  }
  return top;
}

/** Imports `file` and returns the object it exports as its definition (unchecked), or throws RF_MODULE_INVALID. */
async function importDefinition(file: string): Promise<object> {
  const path = resolve(file);
  const ext = extname(path);
  if (!TYPESCRIPT.includes(ext) && !JAVASCRIPT.includes(ext))
    throw bad(`${file}: a processor module must be a ${[...TYPESCRIPT, ...JAVASCRIPT].join(', ')} file`);
  if (!existsSync(path)) throw bad(`${file}: no such file`);
  if (TYPESCRIPT.includes(ext)) await registerTypeScript();
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    throw bad(`${file} failed to load: ${oneLine(err)}`, err);
  }
  const found = pick(mod);
  if (found === undefined)
    throw bad(
      `${file} exports no processor: export default defineProcessor({ ... }) (or export it as "processor")`,
    );
  if (typeof found !== 'object' || found === null)
    throw bad(`${file} exports a ${found === null ? 'null' : typeof found}, not a processor definition`);
  return found;
}

/**
 * Imports `file` and returns its checked processor or handler definition (a handler: made by
 * defineHandler, or any object with a `handle` function), or throws RF_MODULE_INVALID.
 */
export async function loadDefinition(file: string): Promise<ProcessorDefinition | HandlerDefinition> {
  return checked(file, await importDefinition(file));
}

async function checked(file: string, found: object): Promise<ProcessorDefinition | HandlerDefinition> {
  const { defineHandler, defineProcessor } = await import('../index.js');
  try {
    if (typeof (found as { handle?: unknown }).handle === 'function')
      return defineHandler(found as HandlerDefinition);
    return defineProcessor(found as ProcessorDefinition);
  } catch (err) {
    throw bad(`${file}: ${oneLine(err)}`, err);
  }
}

/**
 * What `redfence run` runs: loadDefinition's, a cache invalidation definition (defineInvalidation
 * of redfence/kit: an object with `cache` and `keys`), or a built topology (`topology(...).build()`).
 */
export async function loadRunnable(
  file: string,
): Promise<ProcessorDefinition | HandlerDefinition | InvalidationDefinition | BuiltTopology> {
  const found = await importDefinition(file);
  if (isBuiltTopology(found)) return found;
  if ('cache' in found && 'keys' in found && !('handle' in found)) {
    const { defineInvalidation } = await import('../definition/invalidation.js');
    try {
      return defineInvalidation(found as InvalidationDefinition);
    } catch (err) {
      throw bad(`${file}: ${oneLine(err)}`, err);
    }
  }
  return checked(file, found);
}
