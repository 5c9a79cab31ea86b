/**
 * A real Prometheus server for console tests: the binary of Debian's prometheus package
 * (scripts/prometheus.sh, unpacked beside promtool), on 127.0.0.1 with a port the kernel picks (read
 * from its "Listening on" line), scraping the given targets every second and evaluating, every second,
 * the shipped rules (ops/prometheus/redfence-rules.yml) with each `for:` shortened to `forSeconds`.
 * Stopped (SIGTERM, then SIGKILL) and its directory removed when the test ends.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { Child } from '../../src/harness/index.js';

const ROOT = resolve(import.meta.dirname, '../..');
const RULES = join(ROOT, 'ops/prometheus/redfence-rules.yml');

/** The shipped rules with every `for:` made `forSeconds` long (the expressions as shipped). */
export function shortRules(forSeconds: number): string {
  const text = readFileSync(RULES, 'utf8');
  const out = text.replace(/^(\s+for: )\d+[smh]$/gm, `$1${forSeconds}s`);
  if (!/for: \d+s/.test(out)) throw new Error('no for: found in the shipped rules');
  return out;
}

export interface PrometheusServer {
  /** http://127.0.0.1:<port>/ */
  url: string;
  port: number;
  child: Child;
}

export async function startPrometheus(
  t: TestContext,
  o: { targets: readonly string[]; forSeconds: number; job?: string },
): Promise<PrometheusServer> {
  const bin = execFileSync('bash', [join(ROOT, 'scripts/prometheus.sh')], { encoding: 'utf8' }).trim();
  const dir = mkdtempSync(join(tmpdir(), 'redfence-prometheus-'));
  writeFileSync(join(dir, 'rules.yml'), shortRules(o.forSeconds));
  // JSON is YAML: Prometheus reads it as it is
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '900ms', evaluation_interval: '1s' },
    rule_files: [join(dir, 'rules.yml')],
    scrape_configs: [{ job_name: o.job ?? 'redfence', static_configs: [{ targets: [...o.targets] }] }],
  };
  writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config));
  const child = new Child({
    name: 'prometheus',
    command: bin,
    args: [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      '--web.listen-address=127.0.0.1:0',
      '--storage.tsdb.retention.time=1h',
    ],
  });
  t.after(async () => {
    await child.terminate(10_000);
    rmSync(dir, { recursive: true, force: true });
  });
  // its address is logged once it listens, which may come after it says it is ready
  const LISTENING = /msg="Listening on" address=127\.0\.0\.1:(\d+)/;
  await child.ready({ label: 'Prometheus listening', output: LISTENING, timeoutMs: 30_000 });
  await child.ready({
    label: 'Prometheus ready',
    output: /Server is ready to receive web requests/,
    timeoutMs: 30_000,
  });
  const listening = child.output.lines.map((l) => LISTENING.exec(l)).find((m) => m !== null);
  if (listening?.[1] === undefined) throw new Error(`no "Listening on" line from Prometheus${child.tail()}`);
  const port = Number(listening[1]);
  return { url: `http://127.0.0.1:${port}/`, port, child };
}
