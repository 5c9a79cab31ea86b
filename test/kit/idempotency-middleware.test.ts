import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { pollUntil } from '../../src/harness/index.js';
import {
  createIdempotencyMiddleware,
  IdempotencyStore,
  type IdempotentResponse,
} from '../../src/kit/index.js';
import { standalone, uniqueName } from '../helpers/env.js';

describe('Idempotency-Key middleware on a node:http server', () => {
  it('runs the first POST, replays duplicates, answers 409 while in flight and 422 for another body', async () => {
    const redis = standalone();
    after(() => redis.disconnect());
    const store = new IdempotencyStore<IdempotentResponse>({
      redis,
      name: uniqueName('http'),
      tenant: 'acme',
      ttlMs: 60_000,
      inFlightTtlMs: 10_000,
    });
    let runs = 0;
    let release: () => void = () => {};
    const server = createServer(
      createIdempotencyMiddleware({ store, required: true }, async (req, body) => {
        runs++;
        if (req.url === '/slow') await new Promise<void>((r) => (release = r));
        return {
          status: 201,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ order: runs, echo: body.toString() }),
        };
      }),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    after(() => server.close());
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const post = (path: string, key: string | undefined, body: string) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: key === undefined ? {} : { 'Idempotency-Key': key },
        body,
      });

    const first = await post('/orders', 'key-1', '{"sku":"a"}');
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const firstBody = await first.text();
    const again = await post('/orders', 'key-1', '{"sku":"a"}');
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('content-type'), 'application/json');
    assert.equal(await again.text(), firstBody);
    assert.equal(runs, 1);

    const other = await post('/orders', 'key-1', '{"sku":"b"}');
    assert.equal(other.status, 422);
    assert.equal(((await other.json()) as { status: number }).status, 422);
    assert.equal(runs, 1);

    const slow = post('/slow', 'key-2', 'x');
    await pollUntil('slow running', () => runs === 2, 10_000, 5);
    const dup = await post('/slow', 'key-2', 'x');
    assert.equal(dup.status, 409);
    await dup.text();
    release();
    assert.equal((await slow).status, 201);
    assert.equal((await post('/slow', 'key-2', 'x')).headers.get('idempotent-replayed'), 'true');
    assert.equal(runs, 2);

    const missing = await post('/orders', undefined, 'x');
    assert.equal(missing.status, 400);
    await missing.text();
    assert.equal(runs, 2);

    const outcomes = (await store.registry.getMetricsAsJSON()).find(
      (m) => m.name === 'redfence_kit_idempotency_requests_total',
    );
    const count = (o: string) => outcomes?.values.find((v) => v.labels.outcome === o)?.value ?? 0;
    assert.deepEqual([count('ran'), count('replayed'), count('in-flight'), count('mismatch')], [2, 2, 1, 1]);
  });

  it('bad options fail at construction, naming the option', () => {
    const store = { run: async () => assert.fail('called') } as never;
    for (const [o, msg] of [
      [{}, /"store"/],
      [{ store, header: 'bad header' }, /"header"/],
      [{ store, methods: 'POST' }, /"methods"/],
      [{ store, maxBodyBytes: -1 }, /"maxBodyBytes"/],
      [{ store, extra: 1 }, /unknown option "extra"/],
    ] as [Record<string, unknown>, RegExp][]) {
      assert.throws(
        () => createIdempotencyMiddleware(o as never, async () => ({ status: 200, body: '' })),
        (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && msg.test(e.message),
      );
    }
  });
});
