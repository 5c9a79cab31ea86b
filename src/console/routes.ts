/**
 * The console's routes: the security rules first (src/console/security.ts), then the actions
 * (POST /actions/redrive, POST /actions/outbox-retry), the shipped assets, and a view of the registry per GET route.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RedfenceError } from '../errors/index.js';
import { type ActionDeps, ActionError, redrive } from './actions.js';
import { CONSOLE_CSS, CONSOLE_JS } from './assets.js';
import { type Html, html } from './html.js';
import { page } from './layout.js';
import { retryParked } from './outbox-retry.js';
import { actionRefusal, hostAllowed, securityHeaders } from './security.js';
import type { ConsoleView, ViewContext } from './view.js';

export interface RouteDeps {
  views: readonly ConsoleView[];
  ctx: ViewContext;
  actions: ActionDeps;
  tls: boolean;
  token: string | undefined;
  refreshSeconds: number;
  /** The Host values answered to (known once the port is). */
  hosts: () => Set<string> | 'any';
}

/** A request's path inside the console (its base taken off), or undefined when outside it. */
export function consolePath(pathname: string, base: string): string | undefined {
  if (base === '') return pathname;
  if (pathname === base) return '/';
  return pathname.startsWith(`${base}/`) ? pathname.slice(base.length) : undefined;
}

const MAX_BODY = 16 * 1024;

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => {
      size += b.length;
      if (size > MAX_BODY) {
        reject(new ActionError('request body too large'));
        req.destroy();
      } else parts.push(b);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** An error as a page may show it: its code and message (no stack, no cause). */
function shownError(err: unknown): string {
  if (RedfenceError.is(err)) return `${err.message} [${err.code}]`;
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

const TEXT = 'text/plain; charset=utf-8';

function send(res: ServerResponse, status: number, type: string, text: string): void {
  res.writeHead(status, { 'Content-Type': type });
  res.end(text);
}

/** The request listener of the console's server. */
export function consoleListener(d: RouteDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { views, ctx, tls } = d;
  const htmlPage = (
    res: ServerResponse,
    status: number,
    title: string,
    current: string | undefined,
    b: Html,
  ) =>
    send(
      res,
      status,
      'text/html; charset=utf-8',
      page({
        title,
        views,
        current,
        actions: ctx.actions,
        refreshSeconds: d.refreshSeconds,
        base: ctx.base,
        body: b,
      }),
    );

  async function action(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    if (req.method !== 'POST') {
      res.setHeader('Allow', 'POST');
      return send(res, 405, TEXT, 'actions are POST only\n');
    }
    const form = new URLSearchParams(await body(req));
    const refused = actionRefusal(req, form, { token: d.token, tls });
    if (refused !== undefined)
      return htmlPage(res, 403, 'Refused', undefined, html`<h1>Refused</h1><p class="error">${refused}</p>`);
    const remote = req.socket.remoteAddress ?? '?';
    if (path === '/actions/redrive')
      return htmlPage(res, 200, 'Redrive', 'dead-letters', await redrive(d.actions, form, remote));
    if (path === '/actions/outbox-retry')
      return htmlPage(res, 200, 'Outbox retry', 'outbox', await retryParked(ctx, form, remote));
    return send(res, 404, TEXT, 'no such action\n');
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    securityHeaders(res, tls);
    if (!hostAllowed(req, d.hosts())) return send(res, 403, TEXT, 'unknown Host\n');
    const url = new URL(req.url ?? '/', 'http://console.invalid');
    const path = consolePath(url.pathname, ctx.base);
    if (path === undefined) return send(res, 404, TEXT, 'not found\n');
    if (path.startsWith('/actions/')) return action(req, res, path);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      return send(res, 405, TEXT, 'method not allowed\n');
    }
    if (path === '/assets/console.css') return send(res, 200, 'text/css; charset=utf-8', CONSOLE_CSS);
    if (path === '/assets/console.js') return send(res, 200, 'text/javascript; charset=utf-8', CONSOLE_JS);
    if (path === '/healthz') return send(res, 200, TEXT, 'ok\n');
    if (path === '/') {
      res.setHeader('Location', `${ctx.base}${views[0]?.route ?? '/healthz'}`);
      return send(res, 302, TEXT, '');
    }
    const view = views.find((v) => v.route === path);
    if (view === undefined)
      return htmlPage(
        res,
        404,
        'Not found',
        undefined,
        html`<h1>Not found</h1><p>No view at this address.</p>`,
      );
    return htmlPage(res, 200, view.title, view.id, await view.render(ctx, url.searchParams));
  }

  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return res.end();
      const status = err instanceof ActionError ? 400 : 500;
      htmlPage(res, status, 'Error', undefined, html`<h1>Error</h1><p class="error">${shownError(err)}</p>`);
    });
  };
}
