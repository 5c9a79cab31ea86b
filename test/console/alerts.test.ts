/**
 * The alert rules' state on the console's Instances view, from a real Prometheus (Debian's binary,
 * test/console/prometheus-fixture.ts) scraping a real processor (`redfence run`, on a Redis of its own)
 * every second and evaluating the shipped rules every second with short `for:`s: dead letters fire
 * RedfenceDeadLetters beside the processor's row; its Redis SIGKILLed makes RedfenceRedisOutage pending,
 * then firing, while the page still comes (the registry unreadable: the instances last read, marked
 * so); Redis back, the rule goes inactive. The URL's credentials are used, never shown. Without
 * --prometheus the view says how to enable it; a Prometheus that refuses or never answers is shown
 * unreachable within the timeout; bad options are refused before anything connects.
 */
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startConsole } from '../../src/console/server.js';
import { RedfenceError } from '../../src/errors/index.js';
import { startRedisServer } from '../../src/harness/index.js';
import { freePort, killLeftovers, startProcessorChild } from '../helpers/child.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';
import { customerOrders } from '../helpers/outputs.js';
import { startPrometheus } from './prometheus-fixture.js';

const kafka = (clientId: string) => ({ brokers: KAFKA_BROKERS.split(','), clientId });

/** A rule's row of the page: its state, and its active alerts' states and instance labels. */
function rule(page: string, name: string): { state: string; alerts: string[] } | undefined {
  const row = new RegExp(`<tr data-rule="${name}">(.*?)</tr>`, 's').exec(page)?.[1];
  if (row === undefined) return undefined;
  const state = /data-field="state"[^>]*>([^<]*)</.exec(row)?.[1] ?? '?';
  const alerts = [...row.matchAll(/<li data-state="([^"]*)" data-instance="([^"]*)"/g)].map(
    (m) => `${m[1]}@${m[2]}`,
  );
  return { state, alerts };
}

/** The alerts beside one instance's row: `state rule`. */
function beside(page: string, id: string): string[] {
  const row = new RegExp(`<tr><td><code>${id}</code>(.*?)</tr>`, 's').exec(page)?.[1] ?? '';
  const cell = /data-field="alerts">(.*?)<\/td>/s.exec(row)?.[1] ?? '';
  return [...cell.matchAll(/data-alert="([^"]*)" data-state="([^"]*)"/g)].map((m) => `${m[2]} ${m[1]}`);
}

describe('console alert rules (a real Prometheus, a real processor)', () => {
  after(() => killLeftovers());

  it('dead letters fire beside the instance; a Redis outage goes pending, firing, then inactive', {
    timeout: 240_000,
  }, async (t) => {
    const redis = await startRedisServer({ persistent: true });
    t.after(() => redis.stop());
    const ns = uniqueName('console-alerts');
    const n = { orders: `${ns}-orders`, totals: `${ns}-totals`, store: ns, group: `${ns}-g` };
    t.after(
      await createTopics([
        { topic: n.orders, partitions: 1 },
        { topic: n.totals, partitions: 1 },
        { topic: `${n.orders}.DLT`, partitions: 1 },
      ]),
    );
    // a poison record (an amount that is not an integer) every 50 records
    const poisoned = (count: number) =>
      customerOrders(count, 50).messages.map((o, i) =>
        i % 50 === 25 ? { key: o.key, value: JSON.stringify({ customer: o.key, amount: 1.5 }) } : o,
      );
    await produce(n.orders, poisoned(100));
    const a = await startProcessorChild({
      ...n,
      mode: 'at-least-once',
      instance: uniqueName('A'),
      redisUrl: redis.url,
    });
    t.after(async () => {
      a.term();
      await a.waitExit(30_000).catch(() => a.kill());
    });
    const target = `127.0.0.1:${a.metricsPort}`;
    const prom = await startPrometheus(t, { targets: [target], forSeconds: 6 });
    // the console reads the processor's Redis (where it registers); credentials in the URL are sent
    // (this Prometheus asks for none) and never shown
    const consoleRedis = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    consoleRedis.on('error', () => undefined);
    const secret = 'prom-secret-8472';
    const c = await startConsole({
      redis: consoleRedis,
      kafka: kafka('console-alerts-test'),
      port: 0,
      scrapeTimeoutMs: 1000,
      prometheus: `http://operator:${secret}@127.0.0.1:${prom.port}/`,
      prometheusTimeoutMs: 2000,
    });
    t.after(async () => {
      await c.close();
      consoleRedis.disconnect();
    });
    let page = '';
    const load = async () => {
      const res = await fetch(`${c.url}instances`);
      assert.equal(res.status, 200, 'the Instances view always comes');
      page = await res.text();
      assert.ok(!page.includes(secret), 'no credential on the page');
      return page;
    };
    const seen = () =>
      `rules: ${['RedfenceDeadLetters', 'RedfenceRedisOutage'].map((r) => `${r} ${JSON.stringify(rule(page, r))}`).join('; ')}; beside: ${beside(page, a.name)}${a.tail(5)}`;
    const wait = (label: string, check: () => boolean, ms = 90_000) =>
      pollUntil(
        label,
        async () => {
          await load();
          return check();
        },
        ms,
      ).catch((err: Error) => {
        throw new Error(`${err.message}; ${seen()}`);
      });

    // 1. dead letters: RedfenceDeadLetters (no for:) firing, beside the instance; Redis fine. A rate
    // needs the counter seen before it grows: more dead letters once Prometheus holds the series
    await pollUntil(
      'Prometheus to hold the dead-letter counter',
      async () => {
        const res = await fetch(`${prom.url}api/v1/query?query=redfence_dlq_records_total`);
        const body = (await res.json()) as { data?: { result?: unknown[] } };
        return (body.data?.result?.length ?? 0) > 0;
      },
      120_000,
    ).catch(async (err: Error) => {
      const targets = await (await fetch(`${prom.url}api/v1/targets`)).text();
      const metrics = await fetch(`http://${target}/metrics`)
        .then((r) => r.text())
        .then((x) =>
          x
            .split('\n')
            .filter((l) => /^redfence_(dlq|verdicts)/.test(l))
            .join('; '),
        )
        .catch((e: Error) => e.message);
      throw new Error(`${err.message}; targets ${targets.slice(0, 600)}; metrics ${metrics}${a.tail(8)}`);
    });
    await produce(n.orders, poisoned(100));
    await wait('RedfenceDeadLetters firing beside the instance', () =>
      beside(page, a.name).includes('firing RedfenceDeadLetters'),
    );
    assert.match(page, new RegExp(`Prometheus at <code>http://127\\.0\\.0\\.1:${prom.port}/</code>`));
    const dl = rule(page, 'RedfenceDeadLetters');
    assert.equal(dl?.state, 'firing');
    assert.deepEqual(dl?.alerts, [`firing@${target}`]);
    assert.match(
      /<tr data-rule="RedfenceDeadLetters">(.*?)<\/tr>/s.exec(page)?.[1] ?? '',
      new RegExp(`<code>instance=${target}, job=redfence, reason=[a-z-]+</code>`),
      'the alert with its labels',
    );
    assert.equal(rule(page, 'RedfenceRedisOutage')?.state, 'inactive');
    assert.equal(rule(page, 'RedfenceRedisOutage')?.alerts.length, 0);
    assert.equal(rule(page, 'RedfenceCommitSlow')?.state, 'inactive', 'every shipped rule listed');
    assert.ok(!page.includes('data-field="registry"'), 'the registry was read');

    // 2. the processor's Redis SIGKILLed: its outage metric at 1, the rule pending (its 6 s for:), then
    // firing; the page still comes, with the instances last read and the alert beside the instance
    await redis.kill();
    await wait(
      'RedfenceRedisOutage pending',
      () => rule(page, 'RedfenceRedisOutage')?.state === 'pending',
      60_000,
    );
    assert.deepEqual(rule(page, 'RedfenceRedisOutage')?.alerts, [`pending@${target}`]);
    assert.match(page, /data-field="registry">The registry cannot be read now \(Redis: /);
    assert.ok(beside(page, a.name).includes('pending RedfenceRedisOutage'), seen());
    await wait(
      'RedfenceRedisOutage firing',
      () => rule(page, 'RedfenceRedisOutage')?.state === 'firing',
      30_000,
    );
    assert.ok(beside(page, a.name).includes('firing RedfenceRedisOutage'), seen());

    // 3. Redis back (its AOF kept everything): the registry read again, the outage rule inactive
    await redis.start();
    await wait(
      'RedfenceRedisOutage inactive, the registry read',
      () =>
        rule(page, 'RedfenceRedisOutage')?.state === 'inactive' && !page.includes('data-field="registry"'),
      60_000,
    );
    assert.ok(!beside(page, a.name).some((x) => x.endsWith('RedfenceRedisOutage')), seen());
  });

  it('without --prometheus it says how; a refusing or silent Prometheus is unreachable, within the timeout', {
    timeout: 30_000,
  }, async (t) => {
    const redis = standalone();
    t.after(() => redis.disconnect());
    const sockets: Socket[] = [];
    const silent = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    t.after(
      () =>
        new Promise<void>((r) => {
          for (const s of sockets) s.destroy();
          silent.close(() => r());
        }),
    );
    const silentPort = (silent.address() as { port: number }).port;
    const closedPort = await freePort();
    const start = async (prometheus: string | undefined) => {
      const c = await startConsole({
        redis,
        kafka: kafka('console-alerts-unreachable'),
        port: 0,
        ...(prometheus === undefined ? {} : { prometheus }),
        prometheusTimeoutMs: 400,
      });
      t.after(() => c.close());
      return c;
    };
    const prometheusLine = async (c: { url: string }) => {
      const started = Date.now();
      const res = await fetch(`${c.url}instances`);
      assert.equal(res.status, 200);
      const page = await res.text();
      return {
        ms: Date.now() - started,
        line: /data-field="prometheus"[^>]*>(.*?)<\/p>/s.exec(page)?.[1] ?? '',
      };
    };
    const none = await prometheusLine(await start(undefined));
    assert.match(none.line, /start the console with <code>--prometheus &lt;url&gt;<\/code>/);
    const refused = await prometheusLine(await start(`http://127.0.0.1:${closedPort}`));
    assert.match(refused.line, /unreachable: no answer \(ECONNREFUSED\)/);
    const quiet = await prometheusLine(await start(`https://user:pw-0815@127.0.0.1:${silentPort}/prom`));
    assert.match(
      quiet.line,
      new RegExp(
        `<code>https://127\\.0\\.0\\.1:${silentPort}/prom/</code> unreachable: no answer within 400 ms`,
      ),
    );
    assert.ok(!quiet.line.includes('pw-0815'));
    assert.ok(quiet.ms < 3000, `the page waited ${quiet.ms} ms`);
    assert.ok(sockets.length >= 1, 'the silent Prometheus was asked');
  });

  it('bad options are refused before anything connects, naming the option, never echoing a password', {
    timeout: 60_000,
  }, async () => {
    const redis = new Redis('redis://127.0.0.1:1', { lazyConnect: true });
    const cases: Array<[object, RegExp]> = [
      [
        { prometheus: 'ftp://u:pw-4711@127.0.0.1:9090' },
        /option "prometheus" must be an http:\/\/ or https:\/\/ URL, got "ftp:\/\/127\.0\.0\.1:9090\/"/,
      ],
      [
        { prometheus: 'http://u:pw-4711@127.0.0.1:9090/?x=1' },
        /option "prometheus" must be Prometheus' address without a query/,
      ],
      [{ prometheus: 'not a url' }, /option "prometheus" must be an http:\/\/ or https:\/\/ URL/],
      [
        { prometheus: 'http://127.0.0.1:9090', prometheusTimeoutMs: 5 },
        /option "prometheusTimeoutMs" must be an integer from 100/,
      ],
    ];
    for (const [extra, message] of cases) {
      await assert.rejects(
        startConsole({ redis, kafka: kafka('console-alerts-options'), port: 0, ...extra }),
        (err: unknown) => {
          assert.ok(RedfenceError.is(err, 'RF_INVALID_OPTIONS'), String(err));
          assert.match((err as Error).message, message);
          assert.ok(!(err as Error).message.includes('pw-4711'), (err as Error).message);
          return true;
        },
      );
    }
    assert.equal(redis.status, 'wait', 'nothing connected');
    const none = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];
    for (const [args, message] of [
      [['--prometheus', 'ftp://u:pw-4711@h:1'], /--prometheus must be an http:\/\/ or https:\/\/ URL/],
      [
        ['--prometheus', 'http://u:pw-4711@h:1/?q=1'],
        /--prometheus must be Prometheus' address without a query/,
      ],
      [['--prometheus-timeout', '5'], /--prometheus-timeout must be/],
    ] as const) {
      const r = await runCli(['console', ...none, ...args]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
      assert.match(r.err, message);
      assert.match(r.err, /\[RF_INVALID_OPTIONS\]/);
      assert.ok(!r.err.includes('pw-4711'), r.err);
    }
  });
});
