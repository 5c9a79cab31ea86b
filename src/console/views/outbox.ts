/**
 * The PostgreSQL outbox (only with --database-url): counts, pending and parked rows per aggregate type,
 * roles, relays, and the oldest parked rows with why they were parked; with actions enabled, a form per
 * parked row that retries it (src/console/outbox-retry.ts). Aggregate ids are masked unless
 * `--show-values`; payloads are never read.
 */
import { createHash } from 'node:crypto';
import { html } from '../html.js';
import type { ConsoleView } from '../view.js';

export const outboxView: ConsoleView = {
  id: 'outbox',
  title: 'Outbox',
  route: '/outbox',
  async render(ctx) {
    if (ctx.outbox === undefined)
      return html`<h1>Outbox</h1><p class="notice">No outbox: start the console with <code>--database-url</code>.</p>`;
    const [s, types] = await Promise.all([ctx.outbox.status(), ctx.outbox.byType()]);
    const id = (v: string) =>
      ctx.showValues ? v : `•••• sha256:${createHash('sha256').update(v).digest('hex').slice(0, 8)}`;
    const retry = (rowId: string) =>
      ctx.actions
        ? html`<form method="post" action="${ctx.base}/actions/outbox-retry" data-confirm="Put row ${rowId} back to pending?"><input type="hidden" name="id" value="${rowId}"><label>token <input type="password" name="token" autocomplete="off" required></label> <label>your name (audit) <input name="actor" autocomplete="off"></label> <button type="submit">Retry</button></form>`
        : '';
    return html`<h1>Outbox</h1>
<table><tbody>
<tr><th scope="row">pending</th><td class="num" data-field="pending">${s.pending}</td></tr>
<tr><th scope="row">parked</th><td class="num" data-field="parked">${s.parked}</td></tr>
<tr><th scope="row">published (kept)</th><td class="num">${s.published}</td></tr>
<tr><th scope="row">oldest pending</th><td class="num">${s.oldestPendingSeconds.toFixed(1)} s</td></tr>
</tbody></table>
<h2>By aggregate type</h2>
${types.length === 0 ? html`<p class="muted">Nothing pending or parked.</p>` : ''}
<table data-testid="by-type"><thead><tr><th>aggregate type</th><th class="num">pending</th><th class="num">parked</th></tr></thead>
<tbody>${types.map((t) => html`<tr><td>${t.aggregatetype}</td><td class="num">${t.pending}</td><td class="num">${t.parked}</td></tr>`)}</tbody></table>
<h2>Roles</h2><table><thead><tr><th class="num">role</th><th>owner</th><th class="num">epoch</th><th class="num">lease left ms</th></tr></thead>
<tbody>${s.roles.map((r) => html`<tr><td class="num">${r.role}</td><td>${r.owner ?? '-'}</td><td class="num">${r.epoch}</td><td class="num">${r.expiresInMs}</td></tr>`)}</tbody></table>
<h2>Relays</h2><table><thead><tr><th>owner</th><th class="num">seen ms ago</th></tr></thead>
<tbody>${s.relays.map((r) => html`<tr><td>${r.owner}</td><td class="num">${r.seenMsAgo}</td></tr>`)}</tbody></table>
<h2>Parked rows (oldest ${s.parkedRows.length})</h2>
${ctx.actions ? '' : html`<p class="muted">Read-only: retrying a parked row needs the console started with <code>--allow-actions</code> and a token (or <code>redfence outbox retry &lt;id&gt;</code>).</p>`}
<table data-testid="parked"><thead><tr><th>id</th><th>aggregate type</th><th>aggregate id</th><th class="num">attempts</th><th>reason</th>${ctx.actions ? html`<th>retry</th>` : ''}</tr></thead>
<tbody>${s.parkedRows.map((r) => html`<tr><td><code>${r.id}</code></td><td>${r.aggregatetype}</td><td><code>${id(r.aggregateid)}</code></td><td class="num">${r.attempts}</td><td>${r.error.slice(0, 300)}</td>${ctx.actions ? html`<td>${retry(r.id)}</td>` : ''}</tr>`)}</tbody></table>`;
  },
};
