/**
 * The console's security rules over plain HTTP, against the real broker and Redis: actions are POST
 * only, refused (403) without the token, with a wrong one, from another origin or site, through an
 * unknown Host, and always on a read-only console; every response carries the strict CSP; no page
 * holds the Redis password, the token, or a record's key or value (masked by default); no page has
 * inline script or style. Bad options exit 2 before any connection.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { CSP } from '../../src/console/security.js';
import { startConsole } from '../../src/console/server.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL } from '../helpers/env.js';
import { SECRET_KEY, SECRET_VALUE, world } from './fixture.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request with exactly the headers given (node:http, so Host and Origin can be set). */
function call(
  base: string,
  path: string,
  o: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  const u = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method: o.method ?? 'GET',
        headers: o.headers ?? {},
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`${path} took over 30 s`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

describe('console security (real broker and Redis)', () => {
  it('refuses actions without the token, from elsewhere, by GET, through another Host', async (t) => {
    const w = await world(t);
    const base = w.console.url;
    const host = new URL(base).host;
    const form = new URLSearchParams({ topic: w.dlt, 'dry-run': '1' });
    const post = (headers: Record<string, string>, body = form.toString()) =>
      call(base, '/actions/redrive', { method: 'POST', headers: { ...FORM, ...headers }, body });

    const noToken = await post({});
    assert.equal(noToken.status, 403);
    assert.match(noToken.body, /a valid token is required/);
    assert.equal((await post({ 'x-redfence-token': `${w.token}x` })).status, 403);
    const wrongField = new URLSearchParams({ topic: w.dlt, 'dry-run': '1', token: 'not-the-token-at-all' });
    assert.equal((await post({}, wrongField.toString())).status, 403);
    const cross = await post({ 'x-redfence-token': w.token, origin: 'http://evil.example' });
    assert.equal(cross.status, 403);
    assert.match(cross.body, /cross-origin/);
    assert.equal((await post({ 'x-redfence-token': w.token, 'sec-fetch-site': 'cross-site' })).status, 403);
    assert.equal((await post({ 'x-redfence-token': w.token, host: 'attacker.example' })).status, 403);
    assert.equal(
      (await call(base, '/lag', { headers: { host: `rebound.example:${new URL(base).port}` } })).status,
      403,
    );
    const get = await call(base, `/actions/redrive?${form}`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.allow, 'POST');
    // the same request with the token and the console's own origin runs (a dry run)
    const ok = await post({ 'x-redfence-token': w.token, origin: `http://${host}` });
    assert.equal(ok.status, 200, ok.body);
    assert.match(ok.body, /data-field="matched">1</);
    const trail = await w.admin.xrevrange('rf:console:audit', '+', '-', 'COUNT', 50);
    const mine = trail.find(([, f]) => f.includes(JSON.stringify({ dryRun: 'true', topic: w.dlt })));
    assert.ok(mine, 'the dry run is in the audit trail');
    assert.ok(!JSON.stringify(mine).includes(w.token), 'the audit entry holds no token');
  });

  it('a read-only console refuses every action, whatever the token', async (t) => {
    const w = await world(t, { actions: false });
    const r = await call(w.console.url, '/actions/redrive', {
      method: 'POST',
      headers: { ...FORM, 'x-redfence-token': w.token },
      body: new URLSearchParams({ topic: w.dlt }).toString(),
    });
    assert.equal(r.status, 403);
    assert.match(r.body, /actions are off/);
  });

  it('every page: the strict CSP, no inline code, no password, token, key or value', async (t) => {
    const w = await world(t);
    const pages = [
      '/instances',
      '/lag',
      `/inspector?store=${w.store}&key=${w.stateKey}`,
      `/dead-letters?topic=${w.dlt}`,
      '/outbox',
      '/nope',
      '/assets/console.js',
      '/assets/console.css',
    ];
    for (const p of pages) {
      const r = await call(w.console.url, p);
      assert.equal(r.headers['content-security-policy'], CSP, p);
      assert.equal(r.headers['x-content-type-options'], 'nosniff', p);
      for (const secret of [w.redisPassword, w.token, SECRET_KEY, SECRET_VALUE])
        assert.ok(!r.body.includes(secret), `${p} shows a secret`);
      if (p.startsWith('/assets/')) continue;
      assert.doesNotMatch(r.body, /<script(?![^>]*\ssrc=)[^>]*>/, `${p} has an inline script`);
      assert.doesNotMatch(r.body, /\sstyle=|<style/, `${p} has inline style`);
      assert.doesNotMatch(r.body, /\son[a-z]+=/, `${p} has an inline event handler`);
    }
    const dl = await call(w.console.url, `/dead-letters?topic=${w.dlt}`);
    assert.match(dl.body, /rejected/, 'the planted dead letter is listed with its reason');
    assert.match(dl.body, /•••• 15 B sha256:/, 'its key is masked');
  });

  it('with a certificate it serves HTTPS only, with HSTS, and takes actions from its https origin', async (t) => {
    const tlsDir = join(
      process.env.RF_DEV_DIR ?? join(import.meta.dirname, '..', '..', '.dev'),
      'redis',
      'secure',
      'tls',
    );
    const ca = readFileSync(join(tlsDir, 'ca.crt'));
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    t.after(() => redis.disconnect());
    const token = 'https-test-token-0123456789';
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-tls-test' },
      port: 0,
      tls: { cert: readFileSync(join(tlsDir, 'server.crt')), key: readFileSync(join(tlsDir, 'server.key')) },
      actionToken: token,
    });
    t.after(() => c.close());
    assert.match(c.url, /^https:\/\/127\.0\.0\.1:\d+\/$/);
    const u = new URL(c.url);
    const get = (path: string, method = 'GET', headers: Record<string, string> = {}) =>
      new Promise<{ status: number; hsts: unknown; body: string }>((resolve, reject) => {
        const req = httpsRequest({ host: u.hostname, port: u.port, path, method, ca, headers }, (res) => {
          let body = '';
          res.on('data', (b: Buffer) => {
            body += b.toString('utf8');
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, hsts: res.headers['strict-transport-security'], body }),
          );
        });
        req.setTimeout(30_000, () => req.destroy(new Error('timed out')));
        req.on('error', reject);
        req.end();
      });
    const page = await get('/instances');
    assert.equal(page.status, 200);
    assert.match(String(page.hsts), /max-age=/);
    const plain = await call(`http://${u.host}/`, '/instances').then(
      (r) => r.status,
      () => 'refused',
    );
    assert.notEqual(plain, 200, 'no plain HTTP on the TLS port');
    const refused = await get('/actions/redrive', 'POST', {
      'x-redfence-token': token,
      origin: `http://${u.host}`,
    });
    assert.equal(refused.status, 403, 'the http origin is another origin');
    const missing = await get('/actions/redrive', 'POST', {
      'x-redfence-token': token,
      origin: `https://${u.host}`,
    });
    assert.equal(
      missing.status,
      400,
      'past the checks: a redrive without a console dead-letter topic is a bad request',
    );
  });

  it('bad options exit 2 naming the option, before any connection', async () => {
    const none = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];
    const cases: Array<[string[], RegExp]> = [
      [['--allow-actions'], /--allow-actions needs --token/],
      [['--token', 'short'], /--token must be at least 16 characters/],
      [['--port', '70000'], /--port must be/],
      [['--tls-cert', '/nonexistent.pem'], /--tls-cert and --tls-key go together/],
      [['--tls-cert', '/nonexistent.pem', '--tls-key', '/nonexistent.key'], /--tls-cert: cannot read/],
      [['--host', '0.0.0.0', '--allow-actions', '--token', 'a-token-of-enough-length'], /needs --tls-cert/],
      [['--host', 'example.com'], /--host must be/],
      [['--group', 'bad group'], /--group must be/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['console', ...none, ...args]);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
      assert.match(r.err, message);
      assert.match(r.err, /\[RF_INVALID_OPTIONS\]/);
      assert.ok(!r.err.includes('a-token-of-enough-length'), 'the token is never echoed');
    }
  });
});
