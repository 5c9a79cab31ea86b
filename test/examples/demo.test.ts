/**
 * The README's first command keeps working: the demo (two exactly-once instances, one SIGKILLed
 * midway) passes its own verification on real services.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';

describe('demo (examples/demo.ts)', () => {
  it('reports PASS with every check true after killing an instance', { timeout: 240_000 }, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'examples/demo.ts'], {
      encoding: 'utf8',
      env: { ...process.env, DEMO_RECORDS: '4000', DEMO_CUSTOMERS: '200' },
      timeout: 230_000,
      killSignal: 'SIGTERM', // the demo kills its instances on SIGTERM
    });
    const output = `${r.stdout}\n${r.stderr}`;
    assert.equal(r.status, 0, output);
    assert.match(r.stdout, /\| outputs read \(read_committed\) \| 4000 of 4000 \| yes \|/, output);
    assert.match(r.stdout, /\| dead letters \(read_committed\) \| 5: .* \| yes \|/, output);
    assert.match(r.stdout, /\| b stopped by SIGTERM \| exit 0 after .* \| yes \|/, output);
    assert.doesNotMatch(r.stdout, /\| NO \|/, output);
    assert.match(r.stdout, /^PASS$/m, output);
  });
});
