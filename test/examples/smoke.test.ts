/** The README's first command keeps working: the smoke job passes its own verification on real services. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';

describe('smoke job (examples/smoke.ts)', () => {
  it('reports PASS with every check true', { timeout: 180_000 }, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'examples/smoke.ts'], {
      encoding: 'utf8',
      env: { ...process.env, SMOKE_RECORDS: '3000', SMOKE_CUSTOMERS: '50' },
      timeout: 170_000,
    });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /\| sum of totals in Redis \| 1\d+ \| yes \|/);
    assert.doesNotMatch(r.stdout, /\| NO \|/);
    assert.match(r.stdout, /^PASS$/m);
  });
});
