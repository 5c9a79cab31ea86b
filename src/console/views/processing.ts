/**
 * Processing: what each registered instance's metrics server says (src/console/scrape.ts), scraped at
 * every read of the view, all instances at once, each bounded by the scrape timeout: verdict rates
 * (APPLY, SKIP, REEMIT, REBASE, FENCE, ... and dead letters) between this scrape and one kept from at
 * least a second before, Redis p99 and batch sizes over the same interval, handler records in flight, the retry topic's
 * waiting records and when the first of them is due (negative: overdue), and the outbox's backlog. An instance without a metrics address, or
 * one that does not answer, is a row that says so.
 */
import { type Html, html } from '../html.js';
import { liveInstances } from '../instances.js';
import { type Figures, type ProcessingRow, RATE_COLUMNS } from '../scrape.js';
import type { ConsoleView } from '../view.js';

const n = (v: number | null | undefined, digits = 0, unit = '') =>
  v === null || v === undefined ? '-' : `${v.toFixed(digits)}${unit}`;

function figureTables(f: Figures, now: number): Html {
  const g = f.gauges;
  return html`<table><caption class="muted">records per second</caption><thead><tr>${RATE_COLUMNS.map((v) => html`<th class="num" scope="col">${v}</th>`)}</tr></thead>
<tbody><tr>${RATE_COLUMNS.map((v) => html`<td class="num" data-rate="${v}">${f.seconds === null ? '…' : n(f.rates.get(v) ?? 0, 1)}</td>`)}</tr></tbody></table>
<table><caption class="muted">latency, batches and backlogs</caption><thead><tr><th class="num" scope="col">Redis p99 ms</th><th class="num" scope="col">batch mean</th><th class="num" scope="col">batch p99</th><th class="num" scope="col">handler in flight</th><th class="num" scope="col">retry waiting</th><th class="num" scope="col">retry head due in s</th><th class="num" scope="col">outbox pending</th><th class="num" scope="col">outbox parked</th><th class="num" scope="col">outbox oldest s</th></tr></thead>
<tbody><tr><td class="num" data-field="redis-p99">${n(f.redisP99 === null ? null : f.redisP99 * 1000, 2)}</td>
<td class="num" data-field="batch-mean">${n(f.batchMean, 1)}</td><td class="num" data-field="batch-p99">${n(f.batchP99, 0)}</td>
<td class="num" data-field="in-flight">${n(g.inFlight)}</td>
<td class="num" data-field="retry-waiting">${n(g.retryWaiting)}</td><td class="num" data-field="retry-due">${g.retryOldestDueSeconds === undefined ? '-' : n(g.retryOldestDueSeconds - now / 1000, 1)}</td>
<td class="num" data-field="outbox-pending">${n(g.outboxPending)}</td><td class="num" data-field="outbox-parked">${n(g.outboxParked)}</td><td class="num" data-field="outbox-oldest">${n(g.outboxOldestSeconds, 1)}</td></tr></tbody></table>`;
}

/** An instance's heading line: its kind and group, its metrics address, the interval its rates are over. */
export function instanceLine(r: ProcessingRow): Html {
  const i = r.instance;
  const over =
    r.figures?.seconds === null || r.figures?.seconds === undefined
      ? ''
      : html` · rates over <span data-field="interval">${r.figures.seconds.toFixed(3)}</span> s`;
  return html`<p class="muted">${i.kind}${i.group === undefined ? '' : ` · group ${i.group}`} · metrics ${i.metrics ?? '(none)'}${over}</p>`;
}

function instance(r: ProcessingRow, k: number): Html {
  const i = r.instance;
  return html`<section data-instance="${i.id}" aria-labelledby="i-${k}">
<h2 id="i-${k}"><code>${i.id}</code></h2>
${instanceLine(r)}
${r.figures === undefined ? html`<p class="error" data-field="problem">${r.problem ?? '?'}</p>` : figureTables(r.figures, Date.now())}
</section>`;
}

export const processingView: ConsoleView = {
  id: 'processing',
  title: 'Processing',
  route: '/processing',
  async render(ctx) {
    const rows = await ctx.scrapes.read(await liveInstances(ctx.redis));
    return html`<h1>Processing</h1>
<p class="muted">From each registered instance's <code>/metrics</code>, scraped now. Rates (records per second) are over the time since an earlier scrape of that instance, at least a second before ("…": none yet, read the page again in a second); Redis p99 and batch sizes over the same time, or since the instance started.</p>
${rows.length === 0 ? html`<p class="notice">No instance registered.</p>` : rows.map(instance)}`;
  },
};
