/**
 * The handler `redfence chaos --handler` runs when no module is given: for each record one POST to the
 * far side (REDFENCE_CHAOS_FAR_SIDE, src/chaos/far-side.ts) inside `ctx.once(ctx.id, ...)`, with
 * `ctx.id` as its idempotency key; a non-2xx answer is retriable (retried in place). Its records come
 * from `chaosInput`: `{ n }` values on keys drawn with a skew (a few hot keys, so lanes queue).
 */

import { defineHandler } from '../index.js';
import type { ChaosRandom } from './module.js';

const farSide = process.env.REDFENCE_CHAOS_FAR_SIDE ?? 'http://127.0.0.1:9';

export default defineHandler<{ n: number }>({
  input: 'chaos-webhook',
  name: 'chaos-webhook',
  handle: async (record, ctx) => {
    await ctx.once(ctx.id, async () => {
      const res = await fetch(`${farSide}/effect`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': ctx.id },
        body: JSON.stringify(record.value),
        signal: ctx.signal,
      });
      await res.arrayBuffer();
      if (!res.ok) throw Object.assign(new Error(`far side answered ${res.status}`), { retriable: true });
    });
  },
});

/** `n` records on about n / 10 keys, the low-numbered keys the most frequent. */
export function chaosInput(rng: ChaosRandom, n: number): Array<{ key: string; value: { n: number } }> {
  const keys = Math.max(1, Math.round(n / 10));
  return Array.from({ length: n }, (_, i) => {
    const k = Math.floor(keys * rng.next() ** 2);
    return { key: `k-${k}`, value: { n: i } };
  });
}
