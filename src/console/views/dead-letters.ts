/**
 * Dead letters: one partition of a dead-letter topic a page at a time (src/console/dlq-page.ts), with
 * filters, headers decoded, keys and values masked unless `--show-values`; with actions enabled, forms
 * that start a redrive with its dry run (src/console/actions.ts).
 */
import { headersForDisplay } from '../../dead-letter/decode.js';
import { isDeadLetterHeader } from '../../dead-letter/headers.js';
import type { DltRecord } from '../../dead-letter/read.js';
import { integerField, readSelection } from '../dlq-filter.js';
import { type Html, html, query, shownBytes } from '../html.js';
import type { ConsoleView, ViewContext } from '../view.js';

const LIMIT = 50;
const SCAN = 5000;

function headers(r: DltRecord, show: boolean): Html {
  const shown = headersForDisplay(r.headers);
  const rows = Object.entries(shown).map(([name, v]) => {
    const text = Array.isArray(v) ? v.join(' | ') : v;
    const visible = show || isDeadLetterHeader(name);
    return html`<tr><th scope="row"><code>${name}</code></th><td><code>${visible ? text : '••••'}</code></td></tr>`;
  });
  return html`<details><summary>${rows.length} headers</summary><table>${rows}</table></details>`;
}

function row(r: DltRecord, ctx: ViewContext, topic: string): Html {
  const i = r.info;
  const source =
    i?.originalTopic === undefined
      ? '-'
      : `${i.originalTopic}/${i.originalPartition ?? '?'}@${i.originalOffset?.toString() ?? '?'}`;
  const one = ctx.actions
    ? html`<form method="post" action="${ctx.base}/actions/redrive"><input type="hidden" name="topic" value="${topic}"><input type="hidden" name="dlt-partition" value="${r.partition}"><input type="hidden" name="dlt-offset" value="${r.offset}"><input type="hidden" name="dry-run" value="1"><label>token <input type="password" name="token" autocomplete="off" required></label> <button type="submit">Dry run: redrive this one</button></form>`
    : '';
  return html`<tr><td class="num">${r.partition}</td><td class="num">${r.offset}</td><td>${r.timestamp >= 0 ? new Date(r.timestamp).toISOString() : '-'}</td><td>${i?.scheme ?? '(none)'}</td><td><code>${source}</code></td><td>${i?.reason ?? '-'}</td><td><code>${i?.exceptionClass ?? '-'}</code>${i?.exceptionMessage === undefined ? '' : html`<div class="muted">${i.exceptionMessage.slice(0, 300)}</div>`}</td><td><code>${shownBytes(r.key, ctx.showValues)}</code></td>${ctx.showValues ? html`<td><code>${shownBytes(r.value, true).slice(0, 500)}</code></td>` : ''}<td>${headers(r, ctx.showValues)}${one}</td></tr>`;
}

export const deadLettersView: ConsoleView = {
  id: 'dead-letters',
  title: 'Dead letters',
  route: '/dead-letters',
  async render(ctx, q) {
    if (ctx.dlqTopics.length === 0)
      return html`<h1>Dead letters</h1><p class="notice">No dead-letter topic: start the console with <code>--dlq-topic</code>.</p>`;
    const sel = readSelection(q, ctx.dlqTopics);
    const topic = sel.topic ?? (ctx.dlqTopics[0] as string);
    const parts = await ctx.dlq.partitions(topic);
    const partition = Math.min(integerField(q.get('partition') ?? '') ?? 0, Math.max(0, parts.length - 1));
    const from = integerField(q.get('from') ?? '');
    const p = await ctx.dlq.page({ topic, partition, from, limit: LIMIT, scan: SCAN, filter: sel.filter });
    const f = sel.fields;
    const keep = { ...f, topic, partition };
    const options = ctx.dlqTopics.map(
      (t) => html`<option${t === topic ? html` selected` : ''}>${t}</option>`,
    );
    const partLinks = parts.map(
      (x) =>
        html`<li>${x.partition === partition ? html`<strong>partition ${x.partition}</strong>` : html`<a href="${ctx.base}/dead-letters${query({ ...keep, partition: x.partition })}">partition ${x.partition}</a>`} <span class="muted">(${x.high - x.low} records)</span></li>`,
    );
    const bulk = ctx.actions
      ? html`<h2>Redrive</h2><form method="post" action="${ctx.base}/actions/redrive" class="filters">
<input type="hidden" name="topic" value="${topic}"><input type="hidden" name="dry-run" value="1">
${['reason', 'exception', 'source', 'source-partition'].map((n) => html`<input type="hidden" name="${n}" value="${f[n] ?? ''}">`)}
<label>token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Dry run: redrive every match of ${topic}</button></form>`
      : html`<p class="muted">Read-only: redrive needs the console started with <code>--allow-actions</code> and a token.</p>`;
    return html`<h1>Dead letters</h1>
<form method="get" action="${ctx.base}/dead-letters" class="filters" aria-label="Filters">
<label>topic <select name="topic">${options}</select></label>
<label>reason <input name="reason" value="${f.reason ?? ''}" placeholder="processing-error"></label>
<label>exception <input name="exception" value="${f.exception ?? ''}" placeholder="DataException"></label>
<label>source topic <input name="source" value="${f.source ?? ''}"></label>
<label>source partition <input name="source-partition" value="${f['source-partition'] ?? ''}" inputmode="numeric"></label>
<button type="submit">Show</button></form>
${sel.problems.length === 0 ? '' : html`<p class="error">Ignored: ${sel.problems.join('; ')}</p>`}
<ul class="pager">${partLinks}</ul>
<p class="muted">Partition ${partition}: offsets ${p.low} to ${p.high}; this page read ${p.scanned} records from ${from ?? p.low} and shows ${p.records.length} matching (at most ${LIMIT}).</p>
<table><thead><tr><th class="num">partition</th><th class="num">offset</th><th>dead-lettered</th><th>writer</th><th>source</th><th>reason</th><th>exception</th><th>key</th>${ctx.showValues ? html`<th>value</th>` : ''}<th>headers</th></tr></thead>
<tbody>${p.records.map((r) => row(r, ctx, topic))}</tbody></table>
<div class="pager">${from === undefined || from <= p.low ? '' : html`<a href="${ctx.base}/dead-letters${query({ ...keep })}">first page</a>`}${p.next === undefined ? html`<span class="muted">end of partition</span>` : html`<a href="${ctx.base}/dead-letters${query({ ...keep, from: p.next })}">next page</a>`}</div>
${bulk}`;
  },
};
