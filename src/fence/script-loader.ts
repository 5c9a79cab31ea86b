/**
 * Loads the fence's Lua scripts from `lua/`: one command per file named `<name>-<numKeys>.lua` (`-N`:
 * any number of keys),
 * shared functions in `lua/includes/<name>.lua` pulled in by a line `--@include "<name>"`.
 * Each include is inlined once; cycles are an error. Every script is registered under
 * `<name>@<version>` and starts with a banner naming it, so two library versions never share a SHA.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RedfenceError } from '../errors/index.js';
import { VERSION } from '../version.js';

export interface LoadedScript {
  /** Command name, e.g. `applyRecords`. */
  readonly name: string;
  /** `<name>@<version>`. */
  readonly id: string;
  /** Fixed number of KEYS, or -1 for a variadic script (`<name>-N.lua`: as many as the caller passes). */
  readonly numberOfKeys: number;
  /** Fully resolved Lua source. */
  readonly source: string;
  /** SHA-1 of `source`, as EVALSHA wants it. */
  readonly sha: string;
}

const FILE = /^([A-Za-z][A-Za-z0-9]*)-(\d+|N)\.lua$/;
const INCLUDE = /^--@include "([A-Za-z][A-Za-z0-9]*)"\s*$/;

/** The folder that holds the Lua files (next to this module in both `src/` and `dist/`). */
export const LUA_DIR = fileURLToPath(new URL('./lua/', import.meta.url));

function resolveIncludes(dir: string, text: string, stack: string[], seen: Set<string>): string {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = INCLUDE.exec(line);
    if (!m) {
      out.push(line);
      continue;
    }
    const name = m[1] as string;
    if (stack.includes(name)) {
      throw new RedfenceError(
        'RF_SCRIPT_INCLUDE_CYCLE',
        `Lua include cycle: ${[...stack, name].join(' -> ')}`,
      );
    }
    if (seen.has(name)) continue;
    const file = `${dir}includes/${name}.lua`;
    if (!existsSync(file)) {
      throw new RedfenceError('RF_SCRIPT_NOT_FOUND', `Lua include "${name}" not found (${file})`);
    }
    seen.add(name);
    out.push(`-- begin include ${name}`);
    out.push(resolveIncludes(dir, readFileSync(file, 'utf8'), [...stack, name], seen));
    out.push(`-- end include ${name}`);
  }
  return out.join('\n');
}

/** Loads every `<name>-<numKeys>.lua` script in `dir`. */
export function loadScripts(dir: string = LUA_DIR, version: string = VERSION): Map<string, LoadedScript> {
  const scripts = new Map<string, LoadedScript>();
  for (const file of readdirSync(dir).sort()) {
    const m = FILE.exec(file);
    if (!m) continue;
    const name = m[1] as string;
    const id = `${name}@${version}`;
    const body = resolveIncludes(dir, readFileSync(`${dir}${file}`, 'utf8'), [name], new Set());
    const source = `-- redfence script ${id}\n${body}`;
    scripts.set(name, {
      name,
      id,
      numberOfKeys: m[2] === 'N' ? -1 : Number(m[2]),
      source,
      sha: createHash('sha1').update(source).digest('hex'),
    });
  }
  return scripts;
}
