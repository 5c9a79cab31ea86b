/** The built CLI answers --help and --version (run from dist/, as users run it). */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

describe('redfence CLI', () => {
  it('--help prints usage and exits 0', () => {
    const out = execFileSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
    assert.match(out, /^redfence \d+\.\d+\.\d+/);
    assert.match(out, /Usage:/);
  });

  it('--version prints the package version', () => {
    assert.equal(
      execFileSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' }).trim(),
      pkg.version,
    );
  });

  it('run --help lists the options; run without a module exits 2', () => {
    const out = execFileSync(process.execPath, [BIN, 'run', '--help'], { encoding: 'utf8' });
    assert.match(out, /redfence run <module>/);
    assert.match(out, /--mode <m>/);
    const r = spawnSync(process.execPath, [BIN, 'run'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /redfence run <module>/);
  });

  it('run --static without --instance, or an unknown --group-protocol, fails before starting', () => {
    const a = spawnSync(process.execPath, [BIN, 'run', 'x.js', '--static'], { encoding: 'utf8' });
    assert.equal(a.status, 1);
    assert.match(a.stderr, /--static needs --instance/);
    const b = spawnSync(process.execPath, [BIN, 'run', 'x.js', '--group-protocol', 'eager'], {
      encoding: 'utf8',
    });
    assert.equal(b.status, 1);
    assert.match(b.stderr, /--group-protocol must be classic or consumer, got "eager"/);
  });

  it('an unknown command exits 2 and names it', () => {
    const r = spawnSync(process.execPath, [BIN, 'frobnicate'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown command "frobnicate"/);
  });
});
