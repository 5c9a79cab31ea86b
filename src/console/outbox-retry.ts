/**
 * The console's outbox action: retry a parked row (POST /actions/outbox-retry), as `redfence outbox
 * retry <id>` does (src/outbox/admin.ts `retry`: back to pending, attempts reset; the aggregate's later
 * rows follow it). Reached only through the security rules of every action (--allow-actions, the token,
 * same origin); each call is written to the audit trail with its actor and what it changed.
 */
import { UUID } from '../outbox/event-id.js';
import { ActionError } from './actions.js';
import { audit } from './audit.js';
import { type Html, html } from './html.js';
import type { ViewContext } from './view.js';

/** Retries the parked row the form names; returns the result page's body. */
export async function retryParked(ctx: ViewContext, form: URLSearchParams, remote: string): Promise<Html> {
  if (ctx.outbox === undefined) throw new ActionError('no outbox: start the console with --database-url');
  const id = (form.get('id') ?? '').trim();
  if (!UUID.test(id)) throw new ActionError('id: not an outbox row id (UUID)');
  const changed = await ctx.outbox.retry([id]);
  const actor = (form.get('actor') ?? '').slice(0, 100) || 'token holder';
  const auditId = await audit(ctx.redis, {
    action: 'outbox-retry',
    actor,
    remote,
    params: { id },
    result: { changed },
  });
  return html`<h1>Outbox retry ${changed === 1 ? 'done' : 'changed nothing'}</h1>
<table data-testid="retry-result"><tbody>
<tr><th scope="row">row</th><td><code>${id}</code></td></tr>
<tr><th scope="row">back to pending</th><td class="num" data-field="changed">${changed}</td></tr>
</tbody></table>
${changed === 0 ? html`<p class="notice">The row is not parked (retried already, or published).</p>` : ''}
<p class="muted">Audit entry ${auditId} in <code>rf:console:audit</code>.</p>
<p><a href="${ctx.base}/outbox">back to the outbox</a></p>`;
}
