// Top self-time functions of a .cpuprofile (node --cpu-prof): node bench/hot-path/top.mjs <file> [n]
import { readFileSync } from 'node:fs';

const [file, n = '15'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/hot-path/top.mjs <file.cpuprofile> [n]');
  process.exit(2);
}
const prof = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((node) => [node.id, node]));
const self = new Map();
const dt = prof.timeDeltas;
for (let i = 0; i < prof.samples.length; i++) {
  const node = byId.get(prof.samples[i]);
  const cf = node.callFrame;
  // files by their path under src/, dist/, bench/ or node_modules/ (tsx reports every function at line 1)
  const where = cf.url ? cf.url.replace(/^.*\/(src|dist|bench|node_modules)\//, '$1/') : '';
  const name = `${cf.functionName || '(anonymous)'} ${where}`.trim();
  self.set(name, (self.get(name) ?? 0) + (dt[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(n));
for (const [name, t] of rows)
  console.log(
    `${(t / 1000).toFixed(1).padStart(8)} ms ${((100 * t) / total).toFixed(1).padStart(5)}%  ${name}`,
  );
