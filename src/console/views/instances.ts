/**
 * Instances: the runtimes registered in Redis with a live heartbeat (src/runtime/registry.ts), each
 * with its health as its metrics server's /readyz says now (the parts not ready named) and its active
 * alerts; then the alert rules' state, from the Prometheus that evaluates them (--prometheus). Redis
 * not answering shows the instances last read, marked so (the alerts are what matter then).
 */
import { html } from '../html.js';
import type { ConsoleView } from '../view.js';
import { alertRulesSection, alertsByInstance, alertsCell } from './alert-rules.js';

const ago = (t: number | undefined) =>
  t === undefined ? '-' : `${((Date.now() - t) / 1000).toFixed(0)} s ago`;

export const instancesView: ConsoleView = {
  id: 'instances',
  title: 'Instances',
  route: '/instances',
  async render(ctx) {
    const [list, prometheus] = await Promise.all([ctx.registry.read(), ctx.prometheus?.read()]);
    const rows = list.rows;
    const health = await ctx.scrapes.health(rows);
    const alerts = alertsByInstance(prometheus, rows);
    const healthOf = (id: string) => {
      const h = health.get(id);
      if (h === undefined || h.ready === undefined)
        return html`<span class="muted">${h?.problem ?? '-'}</span>`;
      return h.ready
        ? html`<span data-health="ready">ready</span>`
        : html`<span class="error" data-health="not-ready">not ready: ${h.notReady.join(', ')}</span>`;
    };
    return html`<h1>Instances</h1>
<p class="muted">Runtimes write <code>rf:instances:&lt;id&gt;</code> every few seconds; an instance that stops doing so ages out. Health: each instance's <code>/readyz</code>, read now.</p>
${list.stale === undefined ? '' : html`<p class="error" data-field="registry">The registry cannot be read now (${list.stale.problem}); ${list.stale.at === undefined ? 'no instance read yet' : `the instances as read ${ago(list.stale.at)}`}.</p>`}
${rows.length === 0 && list.stale === undefined ? html`<p class="notice">No instance registered.</p>` : ''}
<table><thead><tr><th>id</th><th>kind</th><th>group</th><th>module</th><th>mode</th><th>version</th><th>host / pid</th><th>started</th><th>heartbeat</th><th>health</th><th>alerts</th><th>metrics</th><th>partitions (epoch)</th></tr></thead>
<tbody>${rows.map(
      (r) =>
        html`<tr><td><code>${r.id}</code></td><td>${r.kind}</td><td>${r.group ?? '-'}</td><td>${r.module ?? '-'}</td><td>${r.mode ?? '-'}</td><td>${r.version ?? '-'}</td><td>${r.host ?? '-'} / ${r.pid ?? '-'}</td><td>${r.started === undefined ? '-' : new Date(r.started).toISOString()}</td><td>${ago(r.seen)}</td><td data-field="health">${healthOf(r.id)}</td><td data-field="alerts">${alertsCell(prometheus, alerts.get(r.id))}</td><td>${r.metrics ?? '-'}</td><td>${r.partitions.map((p) => `${p.topic}/${p.partition}${p.epoch === undefined ? '' : ` (${p.epoch})`}`).join(', ') || '-'}</td></tr>`,
    )}</tbody></table>
${alertRulesSection(prometheus)}`;
  },
};
