/**
 * An instance the chaos harness starts while the run's Redis is down (as a Redis restart keeps it down
 * for 2-14 s) exits 1 at `--connect-timeout` (5 s) before its logger writes a line: `redfence run` says
 * why only on stderr (RF_REDIS_UNAVAILABLE). The harness's start (or restart) of it fails naming the exit
 * and carrying those output lines; before, it read "nothing logged" (a CI run's zombie was restarted so
 * while a Redis restart was under way, and its report said no more). Needs redis-server on the PATH; the
 * instance never reaches Kafka (it connects Redis first).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ChaosRun } from '../../src/chaos/run-context.js';
import { DEFAULTS } from '../../src/chaos/run-options.js';
import { loadChaosTopology } from '../../src/chaos/topology-module.js';
import { RedisServer } from '../../src/harness/index.js';

const WINDOWED = fileURLToPath(new URL('./fixtures/windowed-count.ts', import.meta.url));

describe('chaos: an instance that dies at start', { timeout: 120_000 }, () => {
  it("a start while the run's Redis is down fails naming the exit and the instance's stderr", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'redfence-restart-output-'));
    const server = new RedisServer({ dir });
    const loaded = await loadChaosTopology(WINDOWED);
    assert.ok(loaded);
    const run = new ChaosRun({
      ...DEFAULTS,
      mode: 'at-least-once',
      brokers: ['127.0.0.1:1'],
      topology: { ...loaded, module: WINDOWED, records: [], timestampBase: 0 },
    });
    try {
      // the run's Redis, down: started once (its port is the run's), then SIGKILLed as a Redis restart does
      await server.start();
      await server.kill();
      run.redis = { topology: 'standalone', primary: server, replicaLagMs: 0 };
      const err = await run.addInstance().then(
        () => undefined,
        (e: Error) => e,
      );
      assert.ok(err, 'the instance started with its Redis down');
      assert.match(
        err.message,
        /^i0#0 \(pid \d+\) exited \{"code":1,"signal":null\} before logging "topology processor started"/,
      );
      assert.match(err.message, /\(i0#0: nothing logged\)/, 'no JSON log line: the reason is in the output');
      assert.match(err.message, /--- i0#0 output ---\nredfence run: .*was not ready within 5000 ms/);
      assert.match(err.message, /\[RF_REDIS_UNAVAILABLE\]/);
    } finally {
      await Promise.all(run.everyInstance.map((i) => i.kill()));
      await run.kafka.close();
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
