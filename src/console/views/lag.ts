/** Lag per group, topic and partition: `redfence lag`'s evaluation, kept by the console, with a trend graph. */
import { type Html, html } from '../html.js';
import type { GroupLag } from '../lag-history.js';
import type { ConsoleView } from '../view.js';

const fmt = (n: number | null, digits = 0) => (n === null ? '-' : n.toFixed(digits));

/** The total lag of one topic over the kept history, as an inline SVG line. */
export function trendSvg(label: string, points: ReadonlyArray<readonly [number, number]>): Html {
  const w = 360;
  const h = 80;
  if (points.length === 0) return html`<p class="muted">no samples yet</p>`;
  const max = Math.max(1, ...points.map((p) => p[1]));
  const t0 = (points[0] as readonly [number, number])[0];
  const span = Math.max(1, (points.at(-1) as readonly [number, number])[0] - t0);
  const xy = points
    .map(
      ([t, v]) =>
        `${(((t - t0) / span) * (w - 10) + 5).toFixed(1)},${(h - 15 - (v / max) * (h - 25)).toFixed(1)}`,
    )
    .join(' ');
  const last = (points.at(-1) as readonly [number, number])[1];
  return html`<svg class="trend" role="img" aria-label="${label}: total lag over the last ${points.length} samples, now ${last}, peak ${max}" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><polyline points="${xy}"></polyline><text x="5" y="${h - 3}">now ${last} · peak ${max} · ${points.length} samples</text></svg>`;
}

function group(g: GroupLag, onlyBad: boolean): Html {
  const rows = onlyBad ? g.partitions.filter((p) => p.status !== 'OK') : g.partitions;
  const trends = [...g.trend.entries()].map(
    ([topic, points]) => html`<h3>${topic}</h3>${trendSvg(`${g.group} on ${topic}`, points)}`,
  );
  return html`<section aria-labelledby="g-${g.group}">
<h2 id="g-${g.group}">group ${g.group} <span class="status status-${g.status}">${g.status}</span></h2>
${g.error === undefined ? '' : html`<p class="error">${g.error}</p>`}
<p class="muted">${g.at === undefined ? 'not sampled yet' : `sampled ${new Date(g.at).toISOString()}`} · ${g.partitions.length} partitions</p>
${trends}
<table><caption class="muted">${onlyBad ? 'partitions not OK' : 'every partition'}</caption>
<thead><tr><th>topic</th><th class="num">partition</th><th>status</th><th class="num">committed</th><th class="num">end</th><th class="num">lag</th><th class="num">rate/s</th><th class="num">ETA s</th><th class="num">time lag s</th><th>reasons</th></tr></thead>
<tbody>${rows.map(
    (r) =>
      html`<tr><td>${r.topic}</td><td class="num">${r.partition}</td><td class="status status-${r.status}">${r.status}</td><td class="num">${fmt(r.committed)}</td><td class="num">${fmt(r.end)}</td><td class="num">${fmt(r.lag)}</td><td class="num">${fmt(r.rate, 1)}</td><td class="num">${fmt(r.etaSeconds, 1)}</td><td class="num">${fmt(r.timeLagSeconds, 1)}</td><td>${r.reasons.join(', ')}</td></tr>`,
  )}</tbody></table></section>`;
}

export const lagView: ConsoleView = {
  id: 'lag',
  title: 'Lag',
  route: '/lag',
  async render(ctx, q) {
    const only = q.get('group') ?? '';
    const onlyBad = q.get('bad') === '1';
    const groups = ctx.lag.groups().filter((g) => only === '' || g.group === only);
    return html`<h1>Lag</h1>
<p class="muted">Statuses as <code>redfence lag</code> evaluates them (OK, WARN, STALL, STOP, REWIND, ERR), over the console's last samples.
<a href="${ctx.base}/lag${onlyBad ? '' : '?bad=1'}">${onlyBad ? 'show every partition' : 'show only partitions not OK'}</a></p>
${groups.length === 0 ? html`<p class="notice">No consumer group: give <code>--group</code>, or start instances that register themselves.</p>` : groups.map((g) => group(g, onlyBad))}`;
  },
};
