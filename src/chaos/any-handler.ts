/**
 * The module every instance of `redfence chaos --handler [<module>]` runs (`redfence run <this module,
 * compiled>`): a handler module (REDFENCE_CHAOS_MODULE: the built-in src/chaos/webhook.ts or a user's,
 * loaded as `redfence run` loads it) on the run's input topic, with the run's name (its Redis keys) and
 * `<input>.DLT` for dead letters. Everything else of the definition is the module's.
 *
 * Each `handle` call runs with its record bound (AsyncLocalStorage), and `fetch` calls to the far side
 * (REDFENCE_CHAOS_FAR_SIDE, src/chaos/far-side.ts) carry headers naming the record (partition, offset),
 * `ctx.id` and this process (REDFENCE_CHAOS_INSTANCE), so the far side knows which effect is whose
 * without the module doing anything but call the URL it is given.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { defineHandler, type HandlerDefinition } from '../index.js';
import { loadDefinition } from '../loader/load.js';

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

globalThis.fetch = (resource: Parameters<typeof fetch>[0], init?: RequestInit) => {
  const url =
    typeof resource === 'string' ? resource : resource instanceof URL ? resource.href : resource.url;
  const bound = current.getStore();
  if (bound === undefined || !url.startsWith(farSide)) return plainFetch(resource, init);
  const headers = new Headers(init?.headers ?? (resource instanceof Request ? resource.headers : undefined));
  headers.set('x-chaos-partition', String(bound.partition));
  headers.set('x-chaos-offset', String(bound.offset));
  headers.set('x-chaos-id', bound.id);
  headers.set('x-chaos-instance', instance);
  return plainFetch(resource, { ...init, headers });
};

export default defineHandler<unknown>({
  ...user,
  input,
  name: env('REDFENCE_CHAOS_STORE'),
  deadLetter: `${input}.DLT`,
  handle: (record, ctx) =>
    current.run({ partition: record.partition, offset: record.offset, id: ctx.id }, () =>
      user.handle(record, ctx),
    ),
});
