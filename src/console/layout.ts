/** The page around every view: navigation from the view registry, the shipped CSS and JS only. */
import { type Html, html } from './html.js';
import type { ConsoleView } from './view.js';

export function page(o: {
  title: string;
  views: readonly ConsoleView[];
  current: string | undefined;
  actions: boolean;
  refreshSeconds: number;
  /** The console's path prefix ("" on its own server). */
  base: string;
  body: Html;
}): string {
  const nav = o.views.map(
    (v) =>
      html`<li><a href="${o.base}${v.route}"${v.id === o.current ? html` aria-current="page"` : ''}>${v.title}</a></li>`,
  );
  return `<!doctype html>${
    html`<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${o.title} · redfence console</title>
<link rel="stylesheet" href="${o.base}/assets/console.css">
<script src="${o.base}/assets/console.js" defer></script>
</head><body data-refresh="${o.refreshSeconds}">
<header><a class="brand" href="${o.base}/">redfence console</a>
<nav aria-label="Views"><ul>${nav}</ul></nav>
<label class="mode"><input type="checkbox" id="auto-refresh"> auto refresh</label>
<span class="mode">${o.actions ? 'actions enabled' : 'read-only'}</span></header>
<main id="main">${o.body}</main></body></html>`.text
  }\n`;
}
