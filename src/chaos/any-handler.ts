/**
 * The module every instance of `redfence chaos --handler [<module>]` runs (`redfence run <this module,
 * compiled>`): a handler module (REDFENCE_CHAOS_MODULE: the built-in src/chaos/webhook.ts or a user's,
 * loaded as `redfence run` loads it) on the run's input topic, with the run's name (its Redis keys) and
 * `<input>.DLT` for dead letters. Everything else of the definition is the module's.
 *
 * Each `handle` call runs with its record bound (AsyncLocalStorage), and `fetch` calls to the far side
 * (REDFENCE_CHAOS_FAR_SIDE, src/chaos/far-side.ts) carry headers naming the record (partition, offset),
 * `ctx.id` and this process (REDFENCE_CHAOS_INSTANCE), so the far side knows which effect is whose
 * without the module doing anything but call the URL it is given. When a `handle` call returns, the
 * far side is told so (src/chaos/far-side.ts RETURNED_PATH), before the handler can commit the record:
 * the verdict excuses a repeated effect only when the call that made it never returned.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { defineHandler, type HandlerDefinition } from '../index.js';
import { loadDefinition } from '../loader/load.js';
import { RETURNED_PATH } from './far-side.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: this module is run by redfence chaos --handler`);
  return v;
};

const loaded = await loadDefinition(env('REDFENCE_CHAOS_MODULE'));
if (!('handle' in loaded)) throw new Error('redfence chaos --handler runs handlers, not processors');
const user = loaded as HandlerDefinition<unknown>;
const input = env('REDFENCE_CHAOS_INPUT');
const farSide = env('REDFENCE_CHAOS_FAR_SIDE');
const instance = process.env.REDFENCE_CHAOS_INSTANCE ?? '';

interface Bound {
  partition: number;
  offset: number;
  id: string;
}
const current = new AsyncLocalStorage<Bound>();
const plainFetch = globalThis.fetch;

const chaosHeaders = (b: Bound) => ({
  'x-chaos-partition': String(b.partition),
  'x-chaos-offset': String(b.offset),
  'x-chaos-id': b.id,
  'x-chaos-instance': instance,
});

globalThis.fetch = (resource: Parameters<typeof fetch>[0], init?: RequestInit) => {
  const url =
    typeof resource === 'string' ? resource : resource instanceof URL ? resource.href : resource.url;
  const bound = current.getStore();
  if (bound === undefined || !url.startsWith(farSide)) return plainFetch(resource, init);
  const headers = new Headers(init?.headers ?? (resource instanceof Request ? resource.headers : undefined));
  for (const [k, v] of Object.entries(chaosHeaders(bound))) headers.set(k, v);
  return plainFetch(resource, { ...init, headers });
};

/** Tells the far side a `handle` call returned. A lost report only makes the verdict more lenient. */
async function returned(b: Bound): Promise<void> {
  try {
    const res = await plainFetch(`${farSide}${RETURNED_PATH}`, { method: 'POST', headers: chaosHeaders(b) });
    await res.arrayBuffer();
  } catch {}
}

export default defineHandler<unknown>({
  ...user,
  input,
  name: env('REDFENCE_CHAOS_STORE'),
  deadLetter: `${input}.DLT`,
  handle: async (record, ctx) => {
    const bound = { partition: record.partition, offset: record.offset, id: ctx.id };
    const value = await current.run(bound, () => user.handle(record, ctx));
    await returned(bound);
    return value;
  },
});
