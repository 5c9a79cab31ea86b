/**
 * `redfence chaos` as a user of the npm package runs it: importing the harness registers no process
 * handler, and a short run from the packed tarball (what `files` ships, built dist/ only), unpacked
 * outside the repository with only the package's runtime dependencies beside it (no tsx, no examples/,
 * no sources), works and passes its own verdict. Needs dist/ built (`npm run build`), as the CLI tests do.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KAFKA_BROKERS } from '../helpers/env.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the chaos harness on import', () => {
  it('registers no exit (or signal) listener, from the sources or from dist', async () => {
    const events = ['exit', 'SIGINT', 'SIGTERM', 'uncaughtException'] as const;
    const count = () => events.map((e) => process.listenerCount(e));
    const beforeImport = count();
    await import('../../src/chaos/index.js');
    await import('../../src/harness/index.js');
    await import('../../src/cli/chaos.js');
    assert.deepEqual(count(), beforeImport, 'src/chaos, src/harness, src/cli/chaos');
    assert.ok(existsSync(join(ROOT, 'dist/chaos/index.js')), 'dist/ is built (npm run build)');
    await import(join(ROOT, 'dist/chaos/index.js'));
    await import(join(ROOT, 'dist/harness/index.js'));
    assert.deepEqual(count(), beforeImport, 'dist/chaos, dist/harness');
  });
});

describe('redfence chaos from the packed package', { timeout: 240_000 }, () => {
  let dir: string;
  let pkg: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'redfence-packed-'));
    const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
    execFileSync('tar', ['-xzf', join(dir, tarball), '-C', dir]);
    pkg = join(dir, 'package');
    // the runtime dependencies only, linked from this checkout (npm ls --omit=dev: no typescript), less
    // tsx: the package depends on it for users' .ts modules, but nothing chaos runs may need it
    const paths = execFileSync('npm', ['ls', '--omit=dev', '--all', '--parseable'], {
      cwd: ROOT,
      encoding: 'utf8',
    })
      .split('\n')
      .filter((p) => p.startsWith(join(ROOT, 'node_modules') + sep));
    for (const p of paths) {
      const rel = relative(join(ROOT, 'node_modules'), p);
      if (rel.includes(`${sep}node_modules${sep}`)) continue; // nested: comes with its parent
      if (rel === 'tsx') continue;
      const link = join(pkg, 'node_modules', rel);
      if (existsSync(link)) continue;
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(p, link, 'dir');
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('ships the compiled harness and its processor, and nothing it spawns needs the sources', () => {
    assert.ok(existsSync(join(pkg, 'dist/chaos/customer-totals.js')));
    assert.ok(existsSync(join(pkg, 'dist/harness/child.js')));
    for (const absent of ['src', 'examples', 'test', 'node_modules/tsx', 'node_modules/typescript'])
      assert.equal(existsSync(join(pkg, absent)), false, `${absent} is not there`);
    assert.ok(readdirSync(join(pkg, 'node_modules')).includes('ioredis'));
  });

  it('a short run (one kill) passes its verdict and writes its report and markdown summary', () => {
    const r = spawnSync(
      process.execPath,
      [
        join(pkg, 'dist/cli/bin.js'),
        'chaos',
        '--brokers',
        KAFKA_BROKERS,
        '--records',
        '600',
        '--customers',
        '50',
        '--partitions',
        '2',
        '--duration',
        '8',
        '--large',
        '0',
        '--kills',
        '1',
        '--crashes',
        '0',
        '--zombies',
        '0',
        '--redis-restarts',
        '0',
        '--scale',
        '1',
        '--drain-timeout',
        '60000',
        '--report',
        join(dir, 'out/run.txt'),
      ],
      { cwd: dir, encoding: 'utf8', timeout: 200_000, env: { ...process.env, NODE_OPTIONS: '' } },
    );
    const out = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, out);
    assert.match(r.stdout, /fault #0 kill on i0#0: killed, restarted/);
    assert.match(r.stdout, /VERDICT: OK/);
    assert.match(readFileSync(join(dir, 'out/run.txt'), 'utf8'), /VERDICT: OK/);
    const summary = readFileSync(join(dir, 'out/run.md'), 'utf8');
    assert.match(summary, /^### \d{4}-\d\d-\d\d: exactly-once, seed \d+: OK$/m);
    assert.match(summary, /^`redfence chaos --brokers .* --report .*run\.txt`$/m);
    assert.match(summary, /^\| input \| 600 records: /m);
    assert.match(summary, /^\| violations \| 0 \|$/m);
    assert.match(summary, /^\| kill \| 1 \| 1 \| 1 \|$/m);
  });
});
