/**
 * The in-process lag status: the board's rules from crafted commits, `/status` and
 * `redfence_consumer_lag_seconds` on the metrics server, and `/status` of a running processor (a child
 * `redfence run`) on the real broker and Redis, cross-checked by `redfence lag` on its group.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import { main } from '../../src/cli/main.js';
import { HealthState, RedfenceMetrics, startMetricsServer } from '../../src/index.js';
import { LagBoard, type LagBoardReport } from '../../src/metrics/lag-board.js';
import { killLeftovers, startProcessorChild } from '../helpers/child.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';
import { customerOrders } from '../helpers/outputs.js';

const get = async (port: number, path: string) => {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, type: r.headers.get('content-type'), body: await r.text() };
};

describe('LagBoard', () => {
  it('commits catching up are OK; no commit for a whole window with lag is STALL; forget drops it', () => {
    const b = new LagBoard(10_000);
    b.record('t', 0, { committed: 100, end: 500, lastRecordTime: 1_000 }, 0);
    b.record('t', 0, { committed: 300, end: 500, lastRecordTime: 2_000 }, 1_000);
    b.record('t', 1, { committed: 50, end: 50, lastRecordTime: 2_000 }, 1_000);
    const now = b.report(2_000);
    assert.equal(now.status, 'OK');
    const [p0, p1] = now.partitions;
    assert.deepEqual([p0?.partition, p0?.status, p0?.lag, p0?.rate], [0, 'OK', 200, 100]);
    // the time lag is the age of the last committed record while there is lag (written at 2 s)
    assert.equal(p0?.timeLagSeconds, 0);
    assert.deepEqual([p1?.status, p1?.lag, p1?.timeLagSeconds], ['OK', 0, 0]);
    const later = b.report(30_000);
    assert.equal(later.status, 'STALL');
    assert.deepEqual(later.partitions[0]?.reasons, ['committed-stuck', 'dead']);
    assert.equal(later.partitions[0]?.timeLagSeconds, 28);
    assert.equal(later.partitions[1]?.status, 'OK');
    b.forget('t', 0);
    assert.deepEqual(
      b.report(30_000).partitions.map((p) => p.partition),
      [1],
    );
  });
});

describe('GET /status and redfence_consumer_lag_seconds', () => {
  it('serve the board of the metrics the processor feeds', async () => {
    const metrics = new RedfenceMetrics();
    const server = await startMetricsServer({ metrics, health: new HealthState(), port: 0 });
    try {
      const old = Date.now() - 30_000;
      metrics.lag('orders', 2, 40, { committed: 60, end: 100, lastRecordTime: old });
      metrics.lag('orders', 3, 0, { committed: 10, end: 10, lastRecordTime: old });
      const s = await get(server.port, '/status');
      assert.equal(s.status, 200);
      assert.match(s.type ?? '', /application\/json/);
      const report = JSON.parse(s.body) as LagBoardReport;
      assert.deepEqual(
        report.partitions.map((p) => [p.topic, p.partition, p.lag, p.committed, p.end]),
        [
          ['orders', 2, 40, 60, 100],
          ['orders', 3, 0, 10, 10],
        ],
      );
      const text = (await get(server.port, '/metrics')).body;
      const seconds = /redfence_consumer_lag_seconds\{topic="orders",partition="2"\} (\S+)/.exec(text);
      assert.ok(Number(seconds?.[1]) >= 29, text);
      assert.match(text, /redfence_consumer_lag_seconds\{topic="orders",partition="3"\} 0\n/);
      metrics.clearPartition('orders', 2);
      const after = JSON.parse((await get(server.port, '/status')).body) as LagBoardReport;
      assert.deepEqual(
        after.partitions.map((p) => p.partition),
        [3],
      );
      assert.equal((await fetch(`http://127.0.0.1:${server.port}/status`, { method: 'POST' })).status, 405);
    } finally {
      await server.close();
    }
  });
});

describe('/status of a running processor (real broker and Redis)', () => {
  const n = {
    orders: uniqueName('lag-orders'),
    totals: uniqueName('lag-totals'),
    store: uniqueName('lagstore'),
    group: uniqueName('lag-proc'),
  };
  let drop: () => Promise<void> = async () => undefined;
  afterEach(() => killLeftovers());
  after(async () => {
    await drop();
    const redis = standalone();
    try {
      const keys = await redis.keys(`rf:{${n.store}:*`);
      if (keys.length > 0) await redis.del(...keys);
    } finally {
      redis.disconnect();
    }
  });

  it('shows every owned partition OK with lag 0 once the input is processed; redfence lag agrees', async () => {
    drop = await createTopics([
      { topic: n.orders, partitions: 3 },
      { topic: n.totals, partitions: 3 },
      { topic: `${n.orders}.DLT`, partitions: 3 },
    ]);
    await produce(n.orders, customerOrders(300, 30).messages);
    const a = await startProcessorChild({ ...n, mode: 'at-least-once', instance: 'A' });
    await a.log.waitAssigned();
    let report: LagBoardReport | undefined;
    await pollUntil(
      '/status: 3 partitions, lag 0, OK',
      async () => {
        const r = await get(a.metricsPort, '/status').catch(() => undefined);
        report = r?.status === 200 ? (JSON.parse(r.body) as LagBoardReport) : undefined;
        return (
          report?.partitions.length === 3 && report.partitions.every((p) => p.lag === 0 && p.status === 'OK')
        );
      },
      60_000,
    );
    assert.equal(report?.status, 'OK');
    assert.equal(
      report?.partitions.reduce((s, p) => s + (p.committed ?? 0), 0),
      300,
    );
    let out = '';
    const code = await main(
      [
        'lag',
        '--group',
        n.group,
        '--brokers',
        KAFKA_BROKERS,
        '--samples',
        '2',
        '--interval',
        '100',
        '--json',
      ],
      (s) => {
        out += s;
      },
      () => undefined,
    );
    assert.equal(code, 0, out);
    assert.equal((JSON.parse(out) as { status: string }).status, 'OK');
    a.term();
    await a.waitExit(30_000);
  });
});
