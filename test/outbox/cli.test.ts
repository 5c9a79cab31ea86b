/**
 * `redfence outbox` through the CLI entry (main): bad options (the Kafka security flags included) refused
 * with exit 2 and a coded line before any connection (a listening socket stands in for PostgreSQL and
 * must see none), --print-sql without a database, init, status and retry against a real PostgreSQL, a missing outbox named with
 * RF_OUTBOX_MISSING, and an unreachable database's error without its password.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { main } from '../../src/cli/main.js';
import { enqueue } from '../../src/outbox/index.js';
import { DATABASE_URL } from '../helpers/env.js';
import { inTransaction, rows, type TestSchema, testSchema } from './support.js';

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(
    args,
    (s) => {
      out += s;
    },
    (s) => {
      err += s;
    },
  );
  return { code, out, err };
}

describe('redfence outbox', () => {
  let t: TestSchema;
  let trap: Server;
  let trapUrl: string;
  let connections = 0;
  before(async () => {
    t = await testSchema();
    trap = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => trap.listen(0, '127.0.0.1', r));
    const port = (trap.address() as { port: number }).port;
    trapUrl = `postgres://u:hunter2@127.0.0.1:${port}/x`;
  });
  after(async () => {
    await t.drop();
    await new Promise((r) => trap.close(r));
  });

  it('refuses bad options before connecting', async () => {
    for (const args of [
      ['outbox', 'relay', '--database-url', trapUrl, '--batch-size', '0'],
      ['outbox', 'relay', '--database-url', trapUrl, '--mode', 'twice'],
      ['outbox', 'relay', '--database-url', trapUrl, '--brokers', 'nohost'],
      ['outbox', 'relay', '--database-url', trapUrl, '--kafka-config', 'enable.idempotence=false'],
      ['outbox', 'relay', '--database-url', trapUrl, '--kafka-sasl-username', 'u'],
      ['outbox', 'relay', '--database-url', trapUrl, '--kafka-ca', '/nonexistent/ca.pem'],
      ['outbox', 'relay', '--database-url', trapUrl, '--kafka-security-protocol', 'SASL_SSL'],
      ['outbox', 'status', '--database-url', trapUrl, '--table', 'Bad-Name'],
      ['outbox', 'init', '--database-url', trapUrl, '--roles', '0'],
      ['outbox', 'init', '--database-url', trapUrl, '--roles', '65'],
      ['outbox', 'retry', '--database-url', trapUrl, 'not-a-uuid'],
      ['outbox', 'retry', '--database-url', trapUrl],
      ['outbox', 'status', '--database-url', 'mysql://x'],
      ['outbox', 'frobnicate'],
      ['outbox', 'status'],
    ]) {
      const r = await cli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
      assert.match(r.err, /^redfence outbox: .+ \[RF_INVALID_OPTIONS\]\n$/, args.join(' '));
      assert.doesNotMatch(r.err, /hunter2/);
    }
    assert.equal(connections, 0, 'nothing connected');
  });

  it('prints the migration for another table without a database', async () => {
    const r = await cli(['outbox', 'init', '--print-sql', '--table', 'shop_outbox', '--schema', 'shop']);
    assert.equal(r.code, 0);
    assert.match(r.out, /SET LOCAL search_path TO "shop"/);
    assert.match(r.out, /CREATE TABLE IF NOT EXISTS shop_outbox \(/);
    assert.match(r.out, /generate_series\(0, 4 - 1\)/, 'four roles by default');
    const six = await cli(['outbox', 'init', '--print-sql', '--roles', '6']);
    assert.equal(six.code, 0);
    assert.match(six.out, /generate_series\(0, 6 - 1\)/);
    assert.equal(connections, 0);
  });

  it('init, status and retry against PostgreSQL', async () => {
    const where = ['--database-url', DATABASE_URL, '--schema', t.schema, '--table', 'other_outbox'];
    const missing = await cli(['outbox', 'status', ...where]);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /\[RF_OUTBOX_MISSING\]/);
    const init = await cli(['outbox', 'init', ...where]);
    assert.equal(init.code, 0, init.err);
    assert.match(init.out, new RegExp(`outbox ${t.schema}.other_outbox ready`));

    const [id] = await inTransaction(t.pool, (c) =>
      enqueue(c, { aggregateType: 'a', aggregateId: '1', type: 't' }, { schema: t.schema }),
    );
    await t.pool.query(
      `UPDATE "${t.schema}".redfence_outbox SET state = 'parked', attempts = 5, last_error = 'topic "x" does not exist' WHERE id = $1`,
      [id],
    );
    const st = await cli(['outbox', 'status', '--database-url', DATABASE_URL, '--schema', t.schema]);
    assert.equal(st.code, 0, st.err);
    const status = JSON.parse(st.out);
    assert.equal(status.parked, 1);
    assert.equal(status.roles.length, 4);
    assert.deepEqual(status.parkedRows[0], {
      id,
      aggregatetype: 'a',
      aggregateid: '1',
      attempts: 5,
      error: 'topic "x" does not exist',
    });
    const again = await cli([
      'outbox',
      'retry',
      id as string,
      '--database-url',
      DATABASE_URL,
      '--schema',
      t.schema,
    ]);
    assert.equal(again.code, 0, again.err);
    assert.match(again.out, /^1 row back to pending/);
    const [row] = await rows(t.pool, t.schema);
    assert.equal(row?.state, 'pending');
    assert.equal(row?.attempts, 0);
    const none = await cli([
      'outbox',
      'retry',
      id as string,
      '--database-url',
      DATABASE_URL,
      '--schema',
      t.schema,
    ]);
    assert.equal(none.code, 3, 'nothing parked with that id');
  });

  it('an unreachable database fails with one line and no password', async () => {
    const r = await cli(['outbox', 'status', '--database-url', trapUrl]);
    assert.equal(r.code, 1);
    assert.equal(r.err.split('\n').length, 2, r.err);
    assert.doesNotMatch(r.err, /hunter2/);
  });

  it('without pg installed: RF_PG_MISSING, exit 2', async () => {
    // a resolve hook that hides "pg" from the CLI, as in a project that did not install it
    const hook = `export async function resolve(s, c, next) { if (s === 'pg') throw new Error('Cannot find package pg'); return next(s, c); }`;
    const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});`;
    const child = spawn(
      process.execPath,
      [
        '--import',
        `data:text/javascript,${encodeURIComponent(register)}`,
        '--import',
        'tsx',
        'src/cli/bin.ts',
        'outbox',
        'status',
        '--database-url',
        trapUrl,
      ],
      { cwd: new URL('../..', import.meta.url).pathname, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
    });
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    assert.equal(code, 2, err);
    assert.match(err, /npm install pg \[RF_PG_MISSING\]/);
  });
});
