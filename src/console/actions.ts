/**
 * The console's one action: redrive dead letters (src/dead-letter/replay.ts: a marker per dead letter
 * in Redis written after delivery, so a second redrive of the same records sends nothing). Always a dry
 * run first: its result page holds the form that redrives for real. One dead letter (its DLT partition
 * and offset) or every match of the filters. Each call, dry or not, is written to the audit trail.
 */

import type { DltRecord } from '../dead-letter/read.js';
import { readDeadLetters } from '../dead-letter/read.js';
import { matches, type ReplayResult, replay } from '../dead-letter/replay.js';
import type { ClientSettings } from '../kafka/client-config.js';
import { producerProperties } from '../kafka/client-config.js';
import { DeliveryProducer } from '../kafka/producer.js';
import { audit } from './audit.js';
import { integerField, readSelection } from './dlq-filter.js';
import type { DlqPager } from './dlq-page.js';
import { type Html, html } from './html.js';
import type { ViewContext } from './view.js';

/** Replay markers are kept 30 days, as `redfence dlq replay`'s default. */
const MARKER_TTL_S = 30 * 86_400;
const FIELDS = ['topic', 'reason', 'exception', 'source', 'source-partition', 'dlt-partition', 'dlt-offset'];

export interface ActionDeps {
  ctx: ViewContext;
  pager: DlqPager;
  client: Omit<ClientSettings, 'groupId'>;
  timeoutMs: number;
  producer: () => Promise<DeliveryProducer>;
}

export class ActionError extends Error {}

/** Connects the redrive producer once (idempotent, acks=all). */
export function lazyProducer(client: Omit<ClientSettings, 'groupId'>): {
  get: () => Promise<DeliveryProducer>;
  close: () => Promise<void>;
} {
  let p: Promise<DeliveryProducer> | undefined;
  return {
    get: () => {
      p ??= DeliveryProducer.connect(producerProperties({ ...client, groupId: 'redfence-console' }));
      p.catch(() => {
        p = undefined;
      });
      return p;
    },
    close: async () => {
      const x = await p?.catch(() => undefined);
      p = undefined;
      await x?.close();
    },
  };
}

async function records(d: ActionDeps, form: URLSearchParams, topic: string): Promise<DltRecord[]> {
  const sel = readSelection(form, d.ctx.dlqTopics);
  if (sel.problems.length > 0) throw new ActionError(sel.problems.join('; '));
  const dp = integerField(form.get('dlt-partition') ?? '');
  const dof = integerField(form.get('dlt-offset') ?? '');
  if ((dp === undefined) !== (dof === undefined))
    throw new ActionError('dlt-partition and dlt-offset go together');
  if (dp !== undefined && dof !== undefined) {
    const page = await d.pager.page({ topic, partition: dp, from: dof, limit: 1, scan: 1, filter: {} });
    return page.records.filter((r) => r.offset === dof);
  }
  const out: DltRecord[] = [];
  await readDeadLetters({
    client: d.client,
    topic,
    timeoutMs: d.timeoutMs,
    onRecord: (r) => {
      if (matches(r, sel.filter)) out.push(r);
    },
  });
  return out;
}

/** Runs a redrive (dry or real) from a checked form; returns the result page's body. */
export async function redrive(d: ActionDeps, form: URLSearchParams, remote: string): Promise<Html> {
  const topic = form.get('topic') ?? '';
  if (!d.ctx.dlqTopics.includes(topic))
    throw new ActionError("topic: not one of the console's dead-letter topics");
  const dryRun = form.get('dry-run') !== '0';
  const found = await records(d, form, topic);
  const producer = dryRun || found.length === 0 ? undefined : await d.producer();
  const result: ReplayResult = await replay(found, {
    dltTopic: topic,
    redis: d.ctx.redis,
    ...(producer === undefined ? {} : { producer }),
    dryRun: dryRun || producer === undefined,
    batch: 100,
    markerTtlSeconds: MARKER_TTL_S,
  });
  const params: Record<string, string> = { dryRun: String(dryRun) };
  for (const f of FIELDS) {
    const v = form.get(f);
    if (v !== null && v !== '') params[f] = v;
  }
  const actor = (form.get('actor') ?? '').slice(0, 100) || 'token holder';
  const auditId = await audit(d.ctx.redis, { action: 'redrive', actor, remote, params, result });
  const again = dryRun && result.published > 0;
  return html`<h1>Redrive ${dryRun ? 'dry run' : 'done'}</h1>
<table data-testid="redrive-result"><tbody>
<tr><th scope="row">dead-letter topic</th><td>${topic}</td></tr>
<tr><th scope="row">matching</th><td class="num" data-field="matched">${result.matched}</td></tr>
<tr><th scope="row">${dryRun ? 'would be sent' : 'sent'}</th><td class="num" data-field="published">${result.published}</td></tr>
<tr><th scope="row">already redriven (marker found)</th><td class="num" data-field="already">${result.alreadyReplayed}</td></tr>
<tr><th scope="row">no original topic</th><td class="num">${result.noTopic}</td></tr>
</tbody></table>
<ul>${Object.entries(result.byTopic).map(([t, n]) => html`<li>${n} to ${t}</li>`)}</ul>
<p class="muted">Audit entry ${auditId} in <code>rf:console:audit</code>.</p>
${
  again
    ? html`<form method="post" action="${d.ctx.base}/actions/redrive" data-confirm="Send ${result.published} records now?">
${Object.entries(params)
  .filter(([k]) => k !== 'dryRun')
  .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<input type="hidden" name="dry-run" value="0">
<label>token <input type="password" name="token" autocomplete="off" required></label>
<label>your name (audit) <input name="actor" autocomplete="off"></label>
<button type="submit" class="danger">Redrive ${result.published} now</button></form>`
    : ''
}
<p><a href="${d.ctx.base}/dead-letters?topic=${encodeURIComponent(topic)}">back to the dead letters</a></p>`;
}
