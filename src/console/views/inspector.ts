/**
 * The fence and state inspector: a key's value, its fence (partition, offset, writer epoch) and its
 * pending entries, read as `redfence inspect` reads them (Fence.read); the stamp (partition, offset) is
 * the point of the input log the value is consistent with.
 */
import { Fence } from '../../fence/index.js';
import { html, shownBytes } from '../html.js';
import type { ConsoleView } from '../view.js';

const STORE = /^[A-Za-z0-9_.-]{1,128}$/;

export const inspectorView: ConsoleView = {
  id: 'inspector',
  title: 'Inspector',
  route: '/inspector',
  async render(ctx, q) {
    const store = (q.get('store') ?? '').trim();
    const key = q.get('key') ?? '';
    const form = html`<h1>Fence and state inspector</h1>
<form method="get" action="${ctx.base}/inspector" class="filters" aria-label="Key to inspect">
<label>store <input name="store" value="${store}" required></label>
<label>key <input name="key" value="${key}" required></label>
<button type="submit">Inspect</button></form>`;
    if (store === '' || key === '') return form;
    if (!STORE.test(store)) return html`${form}<p class="error">store: 1-128 of [A-Za-z0-9_.-]</p>`;
    const fence = new Fence({ redis: ctx.redis, store, mode: ctx.fenceMode });
    const state = await fence.read(key);
    if (state === null)
      return html`${form}<p class="notice" data-testid="no-state">No state for this key in store ${store}.</p>`;
    return html`${form}
<h2>Fence</h2>
<table data-testid="fence"><tbody>
<tr><th scope="row">Redis key</th><td><code>${fence.keys.state(key)}</code></td></tr>
<tr><th scope="row">partition</th><td class="num" data-field="partition">${state.partition}</td></tr>
<tr><th scope="row">offset</th><td class="num" data-field="offset">${state.offset}</td></tr>
<tr><th scope="row">epoch</th><td class="num" data-field="epoch">${state.epoch}</td></tr>
<tr><th scope="row">value</th><td><code>${shownBytes(state.value, ctx.showValues)}</code></td></tr>
</tbody></table>
<p class="muted">The value is the state after offset ${state.offset} of partition ${state.partition}, written under epoch ${state.epoch}.</p>
<h2>Pending entries (${state.pending.length})</h2>
<table><thead><tr><th class="num">offset</th><th>kind</th><th>output or reason</th></tr></thead><tbody>
${state.pending.map((p) => html`<tr><td class="num">${p.offset}</td><td>${p.kind}</td><td><code>${p.kind === 'output' ? shownBytes(p.output.value, ctx.showValues) : p.reason}</code></td></tr>`)}
</tbody></table>`;
  },
};
