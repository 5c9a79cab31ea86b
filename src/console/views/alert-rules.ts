/**
 * The alert rules' state on the Instances view (src/console/prometheus.ts): a table of the Redfence
 * rules (state, severity, for, health, the active alerts with their labels and since when), the alerts
 * of each instance beside it (an alert's `instance` label is the scrape target, the instance's
 * registered metrics address, or its id), and how to enable it when the console has no --prometheus.
 */
import { type Html, html } from '../html.js';
import type { InstanceRow } from '../instances.js';
import type { ActiveAlert, PrometheusState } from '../prometheus.js';

/** Labels every alert of a rule has, or that the table shows elsewhere. */
const HIDDEN = new Set(['alertname', 'severity']);

const since = (t: number | undefined, now: number) =>
  t === undefined ? '-' : `${new Date(t).toISOString()} (${Math.max(0, Math.round((now - t) / 1000))} s)`;

/** Beside an instance, its own labels go without saying. */
const HIDDEN_BESIDE = new Set([...HIDDEN, 'instance', 'job']);

const labelText = (labels: Record<string, string>, hidden = HIDDEN) =>
  Object.entries(labels)
    .filter(([k]) => !hidden.has(k))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');

export interface InstanceAlert extends ActiveAlert {
  rule: string;
}

/** Each instance's active alerts (by instance id); empty without a readable Prometheus. */
export function alertsByInstance(
  state: PrometheusState | undefined,
  rows: readonly InstanceRow[],
): Map<string, InstanceAlert[]> {
  const out = new Map<string, InstanceAlert[]>();
  if (state === undefined || !state.reachable) return out;
  const byAddress = new Map<string, string>();
  for (const r of rows) {
    byAddress.set(r.id, r.id);
    if (r.metrics !== undefined) byAddress.set(r.metrics, r.id);
  }
  for (const rule of state.rules)
    for (const a of rule.alerts) {
      const id = byAddress.get(a.labels.instance ?? '');
      if (id === undefined) continue;
      const list = out.get(id) ?? [];
      out.set(id, list);
      list.push({ ...a, rule: rule.name });
    }
  return out;
}

/** The alerts cell of one instance's row. */
export function alertsCell(
  state: PrometheusState | undefined,
  alerts: readonly InstanceAlert[] | undefined,
): Html {
  if (state === undefined) return html`<span class="muted">-</span>`;
  if (!state.reachable) return html`<span class="muted">Prometheus unreachable</span>`;
  if (alerts === undefined || alerts.length === 0) return html`<span class="muted">none</span>`;
  return html`<ul class="alerts">${alerts.map(
    (a) =>
      html`<li data-alert="${a.rule}" data-state="${a.state}"><span class="alert-${a.state}">${a.state}</span> ${a.rule}${labelText(a.labels, HIDDEN_BESIDE) === '' ? '' : html` <span class="muted">(${labelText(a.labels, HIDDEN_BESIDE)})</span>`}</li>`,
  )}</ul>`;
}

/** The "Alert rules" section. */
export function alertRulesSection(state: PrometheusState | undefined): Html {
  if (state === undefined)
    return html`<h2>Alert rules</h2><p class="notice" data-field="prometheus">Not read: start the console with <code>--prometheus &lt;url&gt;</code> (the Prometheus that evaluates <code>ops/prometheus/redfence-rules.yml</code>) to see each rule's state and the alerts beside the instances.</p>`;
  if (!state.reachable)
    return html`<h2>Alert rules</h2><p class="error" data-field="prometheus" data-state="unreachable">Prometheus at <code>${state.url}</code> unreachable: ${state.problem}</p>`;
  const now = Date.now();
  const rows = state.rules.map(
    (r) =>
      html`<tr data-rule="${r.name}"><td><code>${r.name}</code></td><td data-field="state" class="alert-${r.state}">${r.state}</td><td>${r.severity ?? '-'}</td><td class="num">${r.forSeconds === 0 ? '-' : `${r.forSeconds} s`}</td><td>${r.health}${r.lastError === undefined ? '' : html`<div class="error">${r.lastError}</div>`}</td><td>${
        r.alerts.length === 0
          ? html`<span class="muted">-</span>`
          : html`<ul class="alerts">${r.alerts.map(
              (a) =>
                html`<li data-state="${a.state}" data-instance="${a.labels.instance ?? ''}"><span class="alert-${a.state}">${a.state}</span> <code>${labelText(a.labels)}</code> <span class="muted">since ${since(a.since, now)}</span>${a.summary === undefined ? '' : html`<div class="muted">${a.summary}</div>`}</li>`,
            )}</ul>`
      }</td></tr>`,
  );
  return html`<h2>Alert rules</h2>
<p class="muted" data-field="prometheus" data-state="reachable">As Prometheus at <code>${state.url}</code> evaluates them now: the rules named <code>Redfence…</code>, inactive, pending (true, waiting out its <code>for</code>) or firing, with each active alert's labels and since when.</p>
${state.rules.length === 0 ? html`<p class="notice">Prometheus has no alert rule named Redfence…: load <code>ops/prometheus/redfence-rules.yml</code> with <code>rule_files</code>.</p>` : ''}
<table><thead><tr><th scope="col">rule</th><th scope="col">state</th><th scope="col">severity</th><th class="num" scope="col">for</th><th scope="col">health</th><th scope="col">active alerts (labels, since)</th></tr></thead>
<tbody>${rows}</tbody></table>`;
}
