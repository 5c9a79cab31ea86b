/**
 * The console's stylesheet and script, shipped inside the package as string modules (compiled into
 * dist like any source file): nothing is loaded from elsewhere, the page works offline, and the
 * Content-Security-Policy allows only these two files (no inline script or style).
 */

export const CONSOLE_CSS = `
:root { color-scheme: light; --fg: #1b1f24; --muted: #4b5563; --line: #d0d7de; --bg: #ffffff;
  --head: #0b3d91; --ok: #116329; --warn: #7a4d00; --bad: #a40e26; --accent: #0b57d0; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; padding: .6rem 1rem; background: var(--head); color: #fff; }
header a { color: #fff; }
header .brand { font-weight: 700; text-decoration: none; }
nav ul { display: flex; flex-wrap: wrap; gap: .9rem; list-style: none; margin: 0; padding: 0; }
nav a[aria-current="page"] { font-weight: 700; text-decoration: underline; }
header .mode { margin-left: auto; font-size: 12px; }
main { padding: 1rem; max-width: 1400px; }
h1 { font-size: 1.4rem; margin: .2rem 0 .8rem; }
h2 { font-size: 1.15rem; margin: 1.2rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0 1rem; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f4f6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; word-break: break-all; }
.status { font-weight: 700; }
.status-OK { color: var(--ok); }
.status-WARN, .status-REWIND { color: var(--warn); }
.status-STALL, .status-STOP, .status-ERR { color: var(--bad); }
.alert-firing { color: var(--bad); font-weight: 700; }
.alert-pending { color: var(--warn); font-weight: 700; }
.alert-inactive { color: var(--ok); }
ul.alerts { list-style: none; margin: 0; padding: 0; }
.muted { color: var(--muted); }
.error { color: var(--bad); font-weight: 600; }
.notice { border-left: 4px solid var(--accent); padding: .4rem .8rem; background: #eef4ff; }
form.filters { display: flex; flex-wrap: wrap; gap: .6rem 1rem; align-items: flex-end; margin: .5rem 0 1rem; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
input, select, button { font: inherit; padding: .25rem .4rem; border: 1px solid #8c959f; border-radius: 4px; background: #fff; color: var(--fg); }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button.danger { background: var(--bad); border-color: var(--bad); }
svg.trend { display: block; background: #f8fafc; border: 1px solid var(--line); }
svg.trend polyline { fill: none; stroke: var(--accent); stroke-width: 2; }
svg.trend text { font-size: 11px; fill: var(--muted); }
details pre { white-space: pre-wrap; max-height: 20rem; overflow: auto; background: #f6f8fa; padding: .5rem; }
.pager { display: flex; gap: 1rem; margin: .5rem 0; }
`;

export const CONSOLE_JS = `
'use strict';
(function () {
  var box = document.getElementById('auto-refresh');
  var seconds = Number(document.body.getAttribute('data-refresh') || '0');
  if (box && seconds > 0) {
    box.checked = localStorage.getItem('rf-console-refresh') === '1';
    var timer;
    var arm = function () {
      clearTimeout(timer);
      if (box.checked) timer = setTimeout(function () { location.reload(); }, seconds * 1000);
    };
    box.addEventListener('change', function () {
      localStorage.setItem('rf-console-refresh', box.checked ? '1' : '0');
      arm();
    });
    arm();
  }
  document.querySelectorAll('form[data-confirm]').forEach(function (f) {
    f.addEventListener('submit', function (e) {
      if (!window.confirm(f.getAttribute('data-confirm'))) e.preventDefault();
    });
  });
})();
`;
