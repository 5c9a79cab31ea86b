/**
 * HTML for the console: one tagged template, `html`, that escapes every interpolated value unless it is
 * already {@link Html} (the result of another `html` call), so a view cannot forget to escape. Record
 * keys and values go through {@link shownBytes}, which masks them unless the console was started with
 * `--show-values`.
 */
import { createHash } from 'node:crypto';

/** Markup that is already escaped. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Text made safe for an element's content or a quoted attribute. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"'`]/g, (c) => ENTITIES[c] as string);
}

type Part = Html | string | number | bigint | boolean | null | undefined | readonly Part[];

function render(v: Part): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

/** `html\`<td>${text}</td>\``: every value escaped, arrays joined, null/undefined/false empty. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** A record key or value as the console may show it: masked (length and a short digest) by default. */
export function shownBytes(b: Buffer | null | undefined, show: boolean): string {
  if (b === null || b === undefined) return '(null)';
  if (!show) {
    const digest = createHash('sha256').update(b).digest('hex').slice(0, 8);
    return `•••• ${b.length} B sha256:${digest}`;
  }
  const t = b.toString('utf8');
  return Buffer.from(t, 'utf8').equals(b) ? t : `base64:${b.toString('base64')}`;
}

/** A URL query string from pairs, leaving out empty values. */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}
