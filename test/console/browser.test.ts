/**
 * The console in a real browser (Debian's chromium driven by playwright-core; scripts/browser.sh
 * installs it) against the real broker and Redis: a planted dead letter appears with its decoded
 * reason; a dry run lists it; a redrive moves it once and a second one moves nothing; a key's fence
 * shows what `redfence inspect` prints; a registered instance appears and goes, and one with a real
 * metrics server gets rates on the Processing view; a partition whose owner never commits is STALL
 * with `redfence lag`'s reasons; a parked outbox row (parked by a real relay, PostgreSQL) shows its
 * reason, its retry is refused without the token and done, audited, with it; a POST without the
 * token is refused (403); the Instances view lists the shipped alert rules' state from a real Prometheus;
 * no page holds the Redis password, the token, or a record's key or value;
 * axe-core finds no serious or critical violation on the main views. Screenshots go to
 * .dev/console-screens/ (and, with REDFENCE_CONSOLE_SCREENSHOTS=docs, the README's to docs/images/).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { InstanceRegistration } from '../../src/runtime/registry.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { pollUntil, readToEnd } from '../helpers/kafka.js';
import {
  axeSerious,
  type Browser,
  field,
  launch,
  noSecrets,
  newPage as open,
  post as postWith,
  screenshot,
  text,
} from './browser-support.js';
import { SECRET_KEY, stalledGroup, type World, world } from './fixture.js';
import { metricsInstance } from './metrics-fixture.js';
import { AGGREGATE_ID, PAYLOAD_SECRET, parkedOutbox } from './outbox-fixture.js';
import { startPrometheus } from './prometheus-fixture.js';

let browser: Browser;
before(async () => {
  browser = await launch();
});
after(() => browser?.close());

const newPage = (w: World) => open(browser, w);
const post = (w: World, path: string, o: Parameters<typeof postWith>[3]) => postWith(browser, w, path, o);

describe('console in a browser (real broker and Redis)', () => {
  it('dead letter shown, dry run, redrive once, second redrive moves nothing', async (t) => {
    const w = await world(t);
    const page = await newPage(w);
    t.after(() => page.close());
    await page.goto(`/dead-letters?topic=${w.dlt}`);
    const row = page.locator('tbody tr', { hasText: 'rejected' }).first();
    await row.waitFor();
    assert.match(await text(row), new RegExp(`${w.source}/0@0`));
    await screenshot(page, 'dead-letters');
    await noSecrets(page, w, 'dead letters');

    const bulk = page.locator('form', { hasText: 'Dry run: redrive every match' });
    await bulk.locator('input[name="token"]').fill(w.token);
    await bulk.getByRole('button').click();
    await page.waitForURL('**/actions/redrive');
    await screenshot(page, 'redrive-dry-run');
    assert.equal(await field(page, 'matched'), '1', await text(page.locator('main')));
    assert.equal(await field(page, 'published'), '1');
    assert.equal(await readToEnd(w.source).then((r) => r.length), 0, 'a dry run sends nothing');
    await screenshot(page, 'redrive-dry-run');
    await noSecrets(page, w, 'dry run');

    const confirm = page.locator('form[data-confirm]');
    await confirm.locator('input[name="token"]').fill(w.token);
    await confirm.locator('input[name="actor"]').fill('browser test');
    await confirm.getByRole('button').click();
    await page.getByRole('heading', { name: 'Redrive done' }).waitFor();
    assert.equal(await field(page, 'published'), '1');
    const moved = await readToEnd(w.source);
    assert.equal(moved.length, 1);
    assert.equal(moved[0]?.key, SECRET_KEY);

    // a second redrive, dry and real: the marker makes it a no-op
    await page.goto(`/dead-letters?topic=${w.dlt}`);
    const again = page.locator('form', { hasText: 'Dry run: redrive every match' });
    await again.locator('input[name="token"]').fill(w.token);
    await again.getByRole('button').click();
    await page.waitForURL('**/actions/redrive');
    assert.equal(await field(page, 'published'), '0');
    assert.equal(await field(page, 'already'), '1');
    assert.equal(await page.locator('form[data-confirm]').count(), 0, 'nothing left to redrive');
    const real = await post(w, '/actions/redrive', {
      form: { topic: w.dlt, 'dry-run': '0', token: w.token },
      headers: { origin: new URL(w.console.url).origin },
    });
    assert.equal(real.status(), 200);
    assert.match(await real.text(), /data-field="published">0</);
    assert.equal((await readToEnd(w.source)).length, 1, 'still one record after the second redrive');
    const trail = await w.admin.xrevrange('rf:console:audit', '+', '-', 'COUNT', 100);
    const done = trail.filter(
      ([, f]) => f.join('\n').includes(`"topic":"${w.dlt}"`) && f.includes('browser test'),
    );
    assert.equal(done.length, 1, 'the real redrive is audited with its actor');
  });

  it("a key's fence matches redfence inspect; a POST without the token is refused", async (t) => {
    const w = await world(t);
    const page = await newPage(w);
    t.after(() => page.close());
    await page.goto('/inspector');
    await page.getByLabel('store', { exact: true }).fill(w.store);
    await page.getByLabel('key', { exact: true }).fill(w.stateKey);
    await page.getByRole('button', { name: 'Inspect' }).click();
    await page.locator('[data-testid="fence"]').waitFor();
    const cli = await runCli(['inspect', w.store, w.stateKey, '--redis', REDIS_URL]);
    assert.equal(cli.code, 0, cli.err);
    const state = JSON.parse(cli.out).state as { partition: number; offset: number; epoch: number };
    assert.equal(await field(page, 'partition'), String(state.partition));
    assert.equal(await field(page, 'offset'), String(state.offset));
    assert.equal(await field(page, 'epoch'), String(state.epoch));
    assert.equal(state.offset, 42);
    await screenshot(page, 'inspector');
    await noSecrets(page, w, 'inspector');

    const refused = await post(w, '/actions/redrive', { form: { topic: w.dlt, 'dry-run': '0' } });
    assert.equal(refused.status(), 403);
  });

  it('a registered instance appears and goes; the main views pass axe and hold no secret', async (t) => {
    // a real Prometheus with the shipped rules and nothing to scrape: every rule inactive
    const prom = await startPrometheus(t, { targets: [], forSeconds: 6 });
    const w = await world(t, { prometheus: prom.url });
    const page = await newPage(w);
    t.after(() => page.close());
    const id = uniqueName('instance');
    const reg = new InstanceRegistration(
      w.admin,
      'processor',
      () => ({
        id,
        group: uniqueName('group'),
        module: w.store,
        partitions: [{ topic: w.source, partition: 0, epoch: 3 }],
      }),
      200,
    );
    t.after(() => reg.stop());
    reg.start();
    await pollUntil(
      'the instance to be listed',
      async () => {
        await page.goto('/instances');
        return (await page.content()).includes(id);
      },
      15_000,
    );
    assert.match(await text(page.locator('tr', { hasText: id })), new RegExp(`${w.source}/0 \\(3\\)`));
    const states = await page.locator('tr[data-rule] [data-field="state"]').allTextContents();
    // one row per alert of the shipped rules file, none active
    const shipped = (
      readFileSync(new URL('../../ops/prometheus/redfence-rules.yml', import.meta.url), 'utf8').match(
        /^\s*- alert:/gm,
      ) ?? []
    ).length;
    assert.ok(shipped >= 8, `the shipped rules file holds ${shipped} alerts`);
    assert.deepEqual(states, Array(shipped).fill('inactive'), 'the shipped rules, none active');
    await screenshot(page, 'instances');
    await reg.stop();
    await page.goto('/instances');
    assert.ok(!(await page.content()).includes(id), 'gone once stopped');

    // an instance with a real metrics server: two scrapes give its rates
    const m = await metricsInstance(t, w.admin, uniqueName('group'));
    const work = (n: number) => {
      m.metrics.verdict(w.source, 0, 'APPLY', n);
      m.metrics.verdict(w.source, 0, 'SKIP', Math.floor(n / 10));
      for (let i = 0; i < 50; i++) m.metrics.redisCommand('fence-apply', 0.0003 + i * 0.00002);
      m.metrics.batch(n / 4);
    };
    work(400);
    m.metrics.handlerInFlight(w.source, 0, 3);
    m.outbox.sample(5, 1.5, 0);
    await pollUntil('the instance to be scraped', async () => {
      await page.goto('/processing');
      return (await page.locator(`section[data-instance="${m.id}"] [data-rate="APPLY"]`).count()) === 1;
    });
    work(800);
    // rates are over at least the console's least gap between two scrapes (1 s): until then "…"
    const applyRate = page.locator(`section[data-instance="${m.id}"] [data-rate="APPLY"]`);
    await pollUntil('a rate over two scrapes', async () => {
      await page.goto('/processing');
      return (await text(applyRate)) !== '…';
    });
    const apply = Number(await text(applyRate));
    assert.ok(apply > 0, `APPLY rate ${apply}`);
    await screenshot(page, 'processing');

    for (const [name, path] of [
      ['instances', '/instances'],
      ['lag', '/lag'],
      ['processing', '/processing'],
      ['topology', '/topology'],
      ['inspector', `/inspector?store=${w.store}&key=${w.stateKey}`],
      ['dead-letters', `/dead-letters?topic=${w.dlt}`],
      ['outbox', '/outbox'],
    ] as const) {
      await page.goto(path);
      await noSecrets(page, w, name);
      assert.deepEqual(await axeSerious(page), [], `${name}: serious or critical accessibility violations`);
    }
  });

  it('a partition whose owner does not commit shows STALL and its reason, as redfence lag does', async (t) => {
    const { topic, group } = await stalledGroup(t);
    const w = await world(t, { groups: [group] });
    const page = await newPage(w);
    t.after(() => page.close());
    const row = page.locator('tr', { hasText: topic });
    // the console's window (3 samples) fills with samples of the owned, stuck partition
    await pollUntil(
      'the lag view to show the partition STALL',
      async () => {
        await page.goto(`/lag?group=${group}`);
        return (await row.count()) === 1 && (await text(row.locator('td.status'))) === 'STALL';
      },
      30_000,
    );
    const cells = await row.locator('td').allTextContents();
    assert.deepEqual(
      cells.slice(0, 6).map((c) => c.trim()),
      [topic, '0', 'STALL', '2', '20', '18'],
    );
    assert.match(cells.at(-1) ?? '', /committed-stuck/);
    assert.equal(await text(page.locator(`#g-${group} .status`)), 'STALL', "the group's status");
    await screenshot(page, 'lag');
    await noSecrets(page, w, 'lag');
    const cli = await runCli([
      'lag',
      '--brokers',
      KAFKA_BROKERS,
      '--json',
      '--group',
      group,
      '--samples',
      '2',
      '--interval',
      '200',
    ]);
    const report = JSON.parse(cli.out) as { partitions: Array<{ status: string; reasons: string[] }> };
    assert.equal(report.partitions[0]?.status, 'STALL', cli.err);
    assert.deepEqual(
      report.partitions[0]?.reasons,
      (cells.at(-1) ?? '').split(',').map((r) => r.trim()),
      'the same reasons as redfence lag',
    );
  });

  it('outbox: a parked row with its reason, counts per type; retry refused without token, then done and audited', async (t) => {
    const o = await parkedOutbox(t);
    const w = await world(t, { outbox: o.source });
    const page = await newPage(w);
    t.after(() => page.close());
    await page.goto('/outbox');
    const byType = async () =>
      (await page.locator('[data-testid="by-type"] tbody tr').allTextContents()).map((r) => r.trim());
    assert.deepEqual(await byType(), ['nosuchtopic01', 'order10'], 'type, pending, parked');
    const parked = page.locator('[data-testid="parked"] tr', { hasText: o.parkedId });
    const reason = (await o.row(o.parkedId))?.last_error ?? '';
    assert.match(reason, /nosuchtopic/, 'the relay wrote why it parked the row');
    assert.equal(await text(parked.locator('td').nth(4)), reason.slice(0, 300));
    await screenshot(page, 'outbox');
    await noSecrets(page, w, 'outbox', [AGGREGATE_ID, PAYLOAD_SECRET]);
    assert.deepEqual(await axeSerious(page), [], 'outbox: serious or critical accessibility violations');

    const origin = new URL(w.console.url).origin;
    const refused = await post(w, '/actions/outbox-retry', { form: { id: o.parkedId }, headers: { origin } });
    assert.equal(refused.status(), 403);
    assert.equal((await o.row(o.parkedId))?.state, 'parked', 'still parked after the refused retry');

    await parked.locator('input[name="token"]').fill(w.token);
    await parked.locator('input[name="actor"]').fill('outbox browser test');
    await parked.getByRole('button', { name: 'Retry' }).click();
    await page.getByRole('heading', { name: 'Outbox retry done' }).waitFor();
    assert.equal(await field(page, 'changed'), '1');
    const after = await o.row(o.parkedId);
    assert.equal(after?.state, 'pending');
    assert.equal(after?.attempts, 0);
    const trail = await w.admin.xrevrange('rf:console:audit', '+', '-', 'COUNT', 100);
    const entries = trail.filter(([, f]) => f.includes('outbox-retry') && f.join('\n').includes(o.parkedId));
    assert.equal(entries.length, 1, 'the retry is audited once');
    assert.ok(entries[0]?.[1].includes('outbox browser test'), 'with its actor');
    await page.goto('/outbox');
    assert.deepEqual(await byType(), ['nosuchtopic10', 'order10'], 'the row pending again');
  });
});
