/**
 * The console's security rules, in one place:
 * - every response: a strict Content-Security-Policy (only the console's own script and stylesheet,
 *   no inline code, no framing, forms post to the console only), nosniff, no referrer to other sites, no caching;
 *   HSTS over TLS;
 * - every request: a Host the console answers to (a page reached through another name, as by DNS
 *   rebinding, is refused);
 * - actions: POST only, enabled only with `--allow-actions`, a same-origin Origin (when the browser
 *   sends one) and `Sec-Fetch-Site` not cross-site, and the token in the `x-redfence-token` header or
 *   the form's `token` field, compared in constant time.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export function securityHeaders(res: ServerResponse, tls: boolean): void {
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  // not no-referrer: with it a browser sends `Origin: null` on the console's own form posts
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  if (tls) res.setHeader('Strict-Transport-Security', 'max-age=31536000');
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** The Host values the console answers to: its bind address (and the loopback names when it is one). */
export function allowedHosts(bind: string, port: number, extra: readonly string[] = []): Set<string> | 'any' {
  if (bind === '0.0.0.0' || bind === '::') return extra.length === 0 ? 'any' : new Set(extra);
  const names = LOOPBACK.has(bind) ? [...LOOPBACK] : [bind.includes(':') ? `[${bind}]` : bind];
  return new Set([...names.map((n) => `${n}:${port}`), ...extra]);
}

export function hostAllowed(req: IncomingMessage, hosts: Set<string> | 'any'): boolean {
  const host = req.headers.host;
  if (host === undefined) return false;
  return hosts === 'any' || hosts.has(host.toLowerCase());
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time token comparison (digests of equal length, whatever the lengths given). */
export function tokenMatches(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  return timingSafeEqual(digest(given), digest(token));
}

/** Why an action request is refused (403), or undefined when it may run. */
export function actionRefusal(
  req: IncomingMessage,
  form: URLSearchParams,
  o: { token: string | undefined; tls: boolean },
): string | undefined {
  if (o.token === undefined) return 'actions are off (start the console with --allow-actions and a token)';
  const site = req.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return 'cross-site request refused';
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `${o.tls ? 'https' : 'http'}://${req.headers.host ?? ''}`)
    return 'cross-origin request refused';
  const header = req.headers['x-redfence-token'];
  const given = typeof header === 'string' ? header : (form.get('token') ?? undefined);
  if (!tokenMatches(given, o.token)) return 'a valid token is required';
  return undefined;
}
