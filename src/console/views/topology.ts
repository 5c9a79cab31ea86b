/**
 * Topology: per registered instance running a topology (its metrics server exposes the
 * `redfence_topology_*` families), a row per node: records in and out, late and dropped per second
 * (between this scrape and one kept from at least a second before, as the Processing view's rates),
 * their totals since the instance started, and the lag of the repartition topic a node reads. The
 * scrape is the Processing view's (src/console/scrape.ts): every instance at once, each bounded by the
 * scrape timeout. Instances that run no topology are left out; one that does not answer is named.
 */
import { type Html, html } from '../html.js';
import { liveInstances } from '../instances.js';
import type { ProcessingRow } from '../scrape.js';
import type { NodeFigures } from '../topology-figures.js';
import type { ConsoleView } from '../view.js';
import { instanceLine } from './processing.js';

const n = (v: number | null | undefined, digits = 0) =>
  v === null || v === undefined ? '-' : v.toFixed(digits);

function nodeRow(f: NodeFigures): Html {
  const r = f.rates;
  const rate = (v: number | undefined) => (r === null ? '…' : n(v, 1));
  return html`<tr data-node="${f.node}"><td>${f.application}</td><td><code>${f.node}</code></td>
<td class="num" data-rate="in">${rate(r?.in)}</td><td class="num" data-rate="out">${rate(r?.out)}</td>
<td class="num" data-rate="late">${f.late === undefined ? '-' : rate(r?.late)}</td><td class="num" data-rate="dropped">${rate(r?.dropped)}</td>
<td class="num" data-total="in">${n(f.in)}</td><td class="num" data-total="out">${n(f.out)}</td>
<td class="num" data-total="late">${n(f.late)}</td><td class="num" data-total="dropped">${n(f.dropped)}</td>
<td class="num" data-field="repartition-lag">${n(f.lag)}</td></tr>`;
}

function instance(r: ProcessingRow, k: number): Html {
  const i = r.instance;
  const nodes = r.figures?.nodes ?? [];
  return html`<section data-instance="${i.id}" aria-labelledby="t-${k}">
<h2 id="t-${k}"><code>${i.id}</code></h2>
${instanceLine(r)}
<table><thead><tr><th scope="col">application</th><th scope="col">node</th><th class="num" scope="col">in/s</th><th class="num" scope="col">out/s</th><th class="num" scope="col">late/s</th><th class="num" scope="col">dropped/s</th><th class="num" scope="col">in</th><th class="num" scope="col">out</th><th class="num" scope="col">late</th><th class="num" scope="col">dropped</th><th class="num" scope="col">repartition lag</th></tr></thead>
<tbody>${nodes.map(nodeRow)}</tbody></table>
</section>`;
}

export const topologyView: ConsoleView = {
  id: 'topology',
  title: 'Topology',
  route: '/topology',
  async render(ctx) {
    const rows = await ctx.scrapes.read(await liveInstances(ctx.redis));
    const running = rows.filter((r) => (r.figures?.nodes.length ?? 0) > 0);
    const unread = rows.filter((r) => r.figures === undefined);
    return html`<h1>Topology</h1>
<p class="muted">Each topology node of each registered instance, from its <code>/metrics</code> scraped now: records in and out, late (for a windowed aggregation) and dropped, per second over the time since an earlier scrape of that instance at least a second before ("…": none yet, read the page again in a second), their totals since the instance started (committed batches), and the lag of the repartition topic a node reads (records over this instance's partitions).</p>
${running.length === 0 ? html`<p class="notice">No registered instance runs a topology.</p>` : running.map(instance)}
${unread.length === 0 ? '' : html`<p class="muted" data-field="unread">Not read: ${unread.map((r, k) => html`${k > 0 ? ', ' : ''}<code>${r.instance.id}</code> (${r.problem ?? '?'})`)}</p>`}`;
  },
};
