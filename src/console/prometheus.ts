/**
 * The alert rules' state, read from the Prometheus that evaluates them (`--prometheus <url>`): one
 * `GET <url>/api/v1/rules?type=alert` per read, bounded by `timeoutMs` (a Prometheus that does not
 * answer, refuses or answers nonsense is a state of its own: `unreachable`, never an error of the
 * page), its body read up to 8 MB. Only the alert rules named `Redfence…` (the shipped
 * ops/prometheus/redfence-rules.yml, and any rule of yours named so) are kept, each with its state
 * (inactive, pending, firing), its `for`, its health and its active alerts (labels, state, since when).
 * Credentials in the URL are sent as HTTP basic auth and never shown: {@link shownPrometheusUrl} is the
 * address without them, its query or its fragment.
 *
 * ```ts
 * const prom = prometheusSource({ url: 'http://127.0.0.1:9090', timeoutMs: 2000 });
 * const s = await prom.read(); // s.reachable ? s.rules : s.problem
 * ```
 */
import { invalid, shown } from '../options/checks.js';
import { boundedText } from './http-read.js';

const MAX_BODY = 8 * 1024 * 1024;
/** The shipped rules' names all start so. */
const RULE_PREFIX = 'Redfence';

export type AlertState = 'inactive' | 'pending' | 'firing';

export interface ActiveAlert {
  /** The alert's labels (job, instance, topic, partition, reason, severity, alertname...). */
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  /** Since when the alert has been active (pending, then firing), epoch ms; undefined when not given. */
  since: number | undefined;
  /** Its summary annotation (the rule's template filled in), when it has one. */
  summary: string | undefined;
}

export interface AlertRule {
  name: string;
  group: string;
  state: AlertState;
  /** Its `for:` in seconds (0: none). */
  forSeconds: number;
  severity: string | undefined;
  /** Prometheus' health of the rule's last evaluation (ok, err, unknown), with its error when it failed. */
  health: string;
  lastError: string | undefined;
  alerts: ActiveAlert[];
}

export type PrometheusState =
  | { reachable: true; url: string; rules: AlertRule[]; at: number }
  | { reachable: false; url: string; problem: string };

export interface PrometheusOptions {
  url: string;
  timeoutMs: number;
}

export interface PrometheusSource {
  /** The address shown (no credentials). */
  readonly url: string;
  read(): Promise<PrometheusState>;
}

interface Parsed {
  base: URL;
  authorization: string | undefined;
  shown: string;
}

/** The URL without credentials, query or fragment, for pages and error messages. */
export function shownPrometheusUrl(raw: string): string {
  try {
    const u = new URL(raw);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

/**
 * Checks the option (RF_INVALID_OPTIONS naming it: `name` is e.g. `option "prometheus"` or
 * `--prometheus`; the value shown without credentials): an absolute http:// or https:// URL, without a
 * query or fragment.
 */
export function checkPrometheusUrl(name: string, v: unknown): Parsed {
  if (typeof v !== 'string' || v === '')
    throw invalid(`${name} must be an http:// or https:// URL, got ${shown(v)}`);
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw invalid(`${name} must be an http:// or https:// URL, got ${JSON.stringify(shownPrometheusUrl(v))}`);
  }
  const where = JSON.stringify(shownPrometheusUrl(v));
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw invalid(`${name} must be an http:// or https:// URL, got ${where}`);
  if (u.search !== '' || u.hash !== '')
    throw invalid(`${name} must be Prometheus' address without a query or fragment, got ${where}`);
  const authorization =
    u.username === '' && u.password === ''
      ? undefined
      : `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
  u.username = '';
  u.password = '';
  if (!u.pathname.endsWith('/')) u.pathname = `${u.pathname}/`;
  return { base: u, authorization, shown: shownPrometheusUrl(u.toString()) };
}

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

function labelsOf(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof v !== 'object' || v === null) return out;
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
}

function alertOf(v: unknown): ActiveAlert | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const a = v as Record<string, unknown>;
  const state = a.state === 'firing' || a.state === 'pending' ? a.state : undefined;
  if (state === undefined) return undefined;
  const since = Date.parse(str(a.activeAt) ?? '');
  return {
    labels: labelsOf(a.labels),
    state,
    since: Number.isFinite(since) ? since : undefined,
    summary: str((a.annotations as Record<string, unknown> | undefined)?.summary),
  };
}

const ORDER: Record<string, number> = { firing: 0, pending: 1 };

/** The Redfence alert rules of a /api/v1/rules answer, in the order Prometheus lists them. */
export function alertRules(body: unknown): AlertRule[] {
  const data = (body as { data?: { groups?: unknown } } | null)?.data;
  const groups = Array.isArray(data?.groups) ? data.groups : [];
  const out: AlertRule[] = [];
  for (const g of groups as Array<Record<string, unknown>>) {
    const rules = Array.isArray(g?.rules) ? (g.rules as Array<Record<string, unknown>>) : [];
    for (const r of rules) {
      const name = str(r.name);
      if (r.type !== 'alerting' || name === undefined || !name.startsWith(RULE_PREFIX)) continue;
      const state = r.state === 'firing' || r.state === 'pending' ? r.state : 'inactive';
      const alerts = (Array.isArray(r.alerts) ? r.alerts : [])
        .map(alertOf)
        .filter((a): a is ActiveAlert => a !== undefined)
        .sort((a, b) => (ORDER[a.state] ?? 2) - (ORDER[b.state] ?? 2) || (a.since ?? 0) - (b.since ?? 0));
      const lastError = str(r.lastError);
      out.push({
        name,
        group: str(g.name) ?? '',
        state,
        forSeconds: typeof r.duration === 'number' ? r.duration : 0,
        severity: labelsOf(r.labels).severity,
        health: str(r.health) ?? 'unknown',
        lastError: lastError === '' || lastError === undefined ? undefined : lastError.slice(0, 300),
        alerts,
      });
    }
  }
  return out;
}

/** Reads the rules' state from Prometheus; `o.url` must have passed {@link checkPrometheusUrl}. */
export function prometheusSource(o: PrometheusOptions): PrometheusSource {
  const p = checkPrometheusUrl('option "prometheus"', o.url);
  const endpoint = new URL('api/v1/rules?type=alert', p.base);
  const unreachable = (problem: string): PrometheusState => ({ reachable: false, url: p.shown, problem });
  return {
    url: p.shown,
    async read() {
      const signal = AbortSignal.timeout(o.timeoutMs);
      let body: unknown;
      try {
        const res = await fetch(endpoint, {
          signal,
          redirect: 'error',
          headers: {
            Accept: 'application/json',
            ...(p.authorization === undefined ? {} : { Authorization: p.authorization }),
          },
        });
        if (res.status !== 200) {
          await res.body?.cancel();
          return unreachable(`answered HTTP ${res.status}`);
        }
        body = JSON.parse(await boundedText(res, MAX_BODY, 'Prometheus answer'));
      } catch (err) {
        if (signal.aborted) return unreachable(`no answer within ${o.timeoutMs} ms`);
        if (err instanceof SyntaxError) return unreachable('answered something that is not JSON');
        const cause = (err as { cause?: { code?: string } }).cause?.code;
        return unreachable(cause === undefined ? (err as Error).message : `no answer (${cause})`);
      }
      if ((body as { status?: unknown } | null)?.status !== 'success')
        return unreachable('answered without status "success" (not Prometheus\' rules API?)');
      return { reachable: true, url: p.shown, rules: alertRules(body), at: Date.now() };
    },
  };
}
