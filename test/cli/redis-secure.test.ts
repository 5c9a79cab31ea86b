/**
 * `redfence run` (the built CLI) against the TLS, ACL and Sentinel Redis instances of dev/redis-secure.sh:
 * a processor under exactly the least-privilege ACL of docs/operations.md over mutual TLS, on the TLS
 * cluster and through Sentinel (also across a SENTINEL FAILOVER, and through a TLS Sentinel set of the
 * test's own with ACL users on the Sentinels and the data nodes), outputs checked key by key; wrong
 * passwords and untrusted certificates stop it at once with RF_REDIS_AUTH (exit 2); no password in any
 * line it prints. Start the instances with `bash dev/redis.sh up secure`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce, readAll, readToEnd } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';
import { startSentinelTls } from '../helpers/sentinel-tls.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
const ROOT = new URL('../..', import.meta.url).pathname;
const SECURE = join(process.env.RF_DEV_DIR || join(ROOT, '.dev'), 'redis', 'secure');
const TLS = join(SECURE, 'tls');
const secret = (name: string) => readFileSync(join(SECURE, `${name}.password`), 'utf8').trim();
const PW = { redfence: secret('redfence'), admin: secret('admin'), sentinel: secret('sentinel') };
const CA = join(TLS, 'ca.crt');
const SENTINELS = '127.0.0.1:16425,127.0.0.1:16426,127.0.0.1:16427';
const dir = mkdtempSync(join(tmpdir(), 'redfence-secure-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Every line any run printed: scanned for passwords at the end. */
let printed = '';
const NEVER = () => [PW.redfence, PW.admin, PW.sentinel, DOC_PW, 'url-pw-never-shown', ...OWN_PW];
/** The passwords of the Sentinel set a test starts itself. */
const OWN_PW: string[] = [];
const DOC_PW = randomBytes(12).toString('hex');

interface Run {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}
function start(args: string[], env: NodeJS.ProcessEnv): Run {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_)/.test(k)),
  );
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
    printed += d.toString();
  });
  child.stdout?.on('data', (d: Buffer) => {
    printed += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, stderr: () => err, exited };
}

function admin(port: number, tls = true): Redis {
  const r = new Redis({
    host: '127.0.0.1',
    port,
    username: 'admin',
    password: PW.admin,
    ...(tls ? { tls: { ca: readFileSync(CA) } } : {}),
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  r.on('error', () => undefined);
  return r;
}
function sentinel(port = 16425): Redis {
  const r = new Redis({
    host: '127.0.0.1',
    port,
    password: PW.sentinel,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  r.on('error', () => undefined);
  return r;
}

/** The ACL SETUSER line of docs/operations.md. */
function docAclRules(): string {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  const m = /^ACL SETUSER redfence on >PASSWORD (.+)$/m.exec(doc);
  assert.ok(m, 'docs/operations.md has the ACL SETUSER line');
  return m[1] as string;
}

/** A processor through the CLI: records in, outputs read back and checked key by key, SIGTERM, exit 0. */
async function runProcessor(
  redisArgs: string[],
  env: NodeJS.ProcessEnv,
  between?: () => Promise<void>,
): Promise<void> {
  const ns = uniqueName('secure');
  const dropTopics = await createTopics([
    { topic: `${ns}-in`, partitions: 3 },
    { topic: `${ns}-out`, partitions: 3 },
    { topic: `${ns}-in.DLT`, partitions: 3 },
  ]);
  const module = join(dir, `${ns}.mjs`);
  writeFileSync(
    module,
    `export default { input: '${ns}-in', output: '${ns}-out', store: '${ns}', reduce: (s) => ({ state: { count: (s?.count ?? 0) + 1 } }) };\n`,
  );
  const run = start(
    ['run', module, '--brokers', KAFKA_BROKERS, '--group', ns, '--session-timeout', '6000', ...redisArgs],
    env,
  );
  try {
    await pollUntil(
      'the processor started',
      () => run.stderr().includes('"msg":"processor started"'),
      40_000,
    );
    const counts = new Map<string, number>();
    const send = async (n: number) => {
      const msgs = Array.from({ length: n }, (_, i) => ({ key: `k${i % 7}`, value: JSON.stringify({ i }) }));
      for (const m of msgs) counts.set(m.key, (counts.get(m.key) ?? 0) + 1);
      await produce(`${ns}-in`, msgs);
      const want = [...counts.values()].reduce((a, b) => a + b, 0);
      await readAll(`${ns}-out`, (r) => r.length >= want, 60_000);
    };
    await send(60);
    if (between) {
      await between();
      await send(60);
    }
    assertPerKey('outputs', await readToEnd(`${ns}-out`), countOf, countsUpTo(counts));
    run.child.kill('SIGTERM');
    assert.equal(await run.exited, 0, run.stderr());
    assert.doesNotMatch(run.stderr(), /Unhandled error event|"level":"error"/);
  } finally {
    run.child.kill('SIGKILL');
    await dropTopics();
  }
}

describe('redfence run against TLS, ACL and Sentinel Redis', { timeout: 240_000 }, () => {
  it('runs under exactly the documented least-privilege ACL, over mutual TLS', async (t) => {
    const a = admin(16400);
    t.after(() => a.disconnect());
    const user = `rf-doc-${randomBytes(3).toString('hex')}`;
    const rules = docAclRules();
    await a.call('ACL', 'SETUSER', user, 'on', `>${DOC_PW}`, ...rules.split(' '));
    t.after(() => a.call('ACL', 'DELUSER', user).catch(() => undefined));
    // the dev instances' redfence user has the same rule set
    const rulesOf = async (u: string) => {
      const g = (await a.call('ACL', 'GETUSER', u)) as unknown[];
      const at = (k: string) => String(g[g.indexOf(k) + 1]);
      return [at('commands'), at('keys'), at('channels')];
    };
    assert.deepEqual(await rulesOf('redfence'), await rulesOf(user));
    const tls = [
      '--redis-ca',
      CA,
      '--redis-cert',
      join(TLS, 'client.crt'),
      '--redis-key',
      join(TLS, 'client.key'),
    ];
    await runProcessor(['--redis', `rediss://${user}@127.0.0.1:16400`, ...tls], {
      REDFENCE_REDIS_PASSWORD: DOC_PW,
    });
  });

  it('runs on the TLS cluster with an ACL user, the password from a file', async () => {
    const file = join(dir, 'pw');
    writeFileSync(file, `${PW.redfence}\n`, { mode: 0o600 });
    await runProcessor(
      [
        '--cluster',
        '127.0.0.1:16411,127.0.0.1:16412',
        '--redis-tls',
        '--redis-ca',
        CA,
        '--redis-user',
        'redfence',
      ],
      { REDFENCE_REDIS_PASSWORD_FILE: file },
    );
  });

  it('runs through Sentinel and keeps exact outputs across a SENTINEL FAILOVER', async (t) => {
    const s = sentinel();
    t.after(() => s.disconnect());
    const primary = async () =>
      ((await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'rfprimary')) as string[]).join(':');
    await runProcessor(
      [
        '--sentinels',
        SENTINELS,
        '--sentinel-name',
        'rfprimary',
        '--wait-replicas',
        '1',
        '--wait-timeout',
        '2000',
      ],
      {
        REDFENCE_REDIS_USER: 'redfence',
        REDFENCE_REDIS_PASSWORD: PW.redfence,
        REDFENCE_SENTINEL_PASSWORD: PW.sentinel,
      },
      async () => {
        const before = await primary();
        assert.equal(await s.call('SENTINEL', 'FAILOVER', 'rfprimary'), 'OK');
        await pollUntil(
          'a new primary serves',
          async () => {
            const now = await primary();
            if (now === before) return false;
            const node = admin(Number(now.split(':')[1]), false);
            try {
              const role = (await node.call('ROLE')) as unknown[];
              return role[0] === 'master' && Array.isArray(role[2]) && role[2].length === 1;
            } catch {
              return false;
            } finally {
              node.disconnect();
            }
          },
          30_000,
        );
      },
    );
  });

  it('runs through TLS Sentinels with ACL users on the Sentinels and the data nodes, across a SENTINEL FAILOVER', async (t) => {
    const set = await startSentinelTls(TLS, docAclRules());
    t.after(() => set.stop());
    OWN_PW.push(...Object.values(set.passwords));
    const sentinels = set.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',');
    const pwFile = join(dir, 'sentinel-pw');
    writeFileSync(pwFile, `${set.passwords.sentinel}\n`, { mode: 0o600 });
    const s = set.sentinel();
    t.after(() => s.disconnect());
    const primary = async () =>
      ((await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', set.name)) as string[])[1];
    const args = (user: string) => [
      '--sentinels',
      sentinels,
      '--sentinel-name',
      set.name,
      '--redis-tls',
      '--sentinel-tls',
      '--redis-ca',
      CA,
      '--redis-user',
      'redfence',
      '--sentinel-user',
      user,
    ];
    await runProcessor(
      [
        ...args('rfsentinel'),
        '--sentinel-password-file',
        pwFile,
        '--wait-replicas',
        '1',
        '--wait-timeout',
        '2000',
      ],
      { REDFENCE_REDIS_PASSWORD: set.passwords.redfence },
      async () => {
        const before = await primary();
        assert.equal(await s.call('SENTINEL', 'FAILOVER', set.name), 'OK');
        await pollUntil(
          'the replica serves as the primary, with the old one as its replica',
          async () => {
            const now = await primary();
            if (now === before) return false;
            const node = set.admin(Number(now));
            try {
              const role = (await node.call('ROLE')) as unknown[];
              return role[0] === 'master' && Array.isArray(role[2]) && role[2].length === 1;
            } catch {
              return false;
            } finally {
              node.disconnect();
            }
          },
          30_000,
        );
      },
    );
    // the Sentinels' user and TLS are what they take: a wrong password or user is refused at once
    const module = join(dir, 'refused-tls.mjs');
    writeFileSync(
      module,
      `export default { input: 'in', output: 'out', store: 'x', reduce: (s, r) => ({ state: r }) };\n`,
    );
    for (const [user, pw] of [
      ['rfsentinel', 'wrong'],
      ['nobody', set.passwords.sentinel],
    ] as const) {
      const r = start(
        ['run', module, '--brokers', KAFKA_BROKERS, '--connect-timeout', '20000', ...args(user)],
        {
          REDFENCE_REDIS_PASSWORD: set.passwords.redfence,
          REDFENCE_SENTINEL_PASSWORD: pw,
        },
      );
      assert.equal(await r.exited, 2, r.stderr());
      assert.match(
        r.stderr().trimEnd().split('\n').at(-1) as string,
        /the Sentinels refused the credentials \(WRONGPASS.*\[RF_REDIS_AUTH\]$/,
      );
    }
  });

  it('a wrong password, an untrusted certificate or a wrong Sentinel password: RF_REDIS_AUTH at once, exit 2', async () => {
    const module = join(dir, 'refused.mjs');
    writeFileSync(
      module,
      `export default { input: 'in', output: 'out', store: 'x', reduce: (s, r) => ({ state: r }) };\n`,
    );
    const cases: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
      [
        ['--redis', 'rediss://redfence:url-pw-never-shown@127.0.0.1:16400', '--redis-ca', CA],
        {},
        /^redfence run: Redis at rediss:\/\/redfence:\*\*\*@127\.0\.0\.1:16400 refused the credentials \(WRONGPASS/,
      ],
      [
        ['--redis', 'rediss://redfence@127.0.0.1:16400', '--redis-ca', CA],
        { REDFENCE_REDIS_PASSWORD: `${PW.redfence}x` },
        /refused the credentials \(WRONGPASS invalid username-password pair or user is disabled\)/,
      ],
      [
        ['--redis', 'rediss://redfence@127.0.0.1:16400', '--redis-ca', join(TLS, 'other-ca.crt')],
        { REDFENCE_REDIS_PASSWORD: PW.redfence },
        /failed the TLS handshake: self-signed certificate in certificate chain \(SELF_SIGNED_CERT_IN_CHAIN\); check --redis-ca/,
      ],
      [
        [
          '--cluster',
          '127.0.0.1:16411',
          '--redis-tls',
          '--redis-ca',
          join(TLS, 'other-ca.crt'),
          '--redis-user',
          'redfence',
        ],
        { REDFENCE_REDIS_PASSWORD: PW.redfence },
        /^redfence run: Redis Cluster at 127\.0\.0\.1:16411 failed the TLS handshake: .*SELF_SIGNED_CERT_IN_CHAIN/,
      ],
      [
        ['--cluster', '127.0.0.1:16411', '--redis-tls', '--redis-ca', CA, '--redis-user', 'redfence'],
        { REDFENCE_REDIS_PASSWORD: 'wrong' },
        /Redis Cluster at 127\.0\.0\.1:16411 refused the credentials \(WRONGPASS/,
      ],
      [
        ['--sentinels', SENTINELS, '--sentinel-name', 'rfprimary', '--redis-user', 'redfence'],
        { REDFENCE_REDIS_PASSWORD: PW.redfence, REDFENCE_SENTINEL_PASSWORD: 'wrong' },
        /the Sentinels refused the credentials \(WRONGPASS.*check --sentinel-password-file/,
      ],
      [
        ['--sentinels', SENTINELS, '--sentinel-name', 'rfprimary', '--redis-user', 'redfence'],
        { REDFENCE_REDIS_PASSWORD: 'wrong', REDFENCE_SENTINEL_PASSWORD: PW.sentinel },
        /Redis primary "rfprimary" of the Sentinels at .* refused the credentials \(WRONGPASS/,
      ],
    ];
    for (const [args, env, expected] of cases) {
      const started = Date.now();
      const r = start(
        ['run', module, '--brokers', KAFKA_BROKERS, '--connect-timeout', '20000', ...args],
        env,
      );
      const code = await r.exited;
      const ms = Date.now() - started;
      assert.equal(code, 2, `${args.join(' ')}: ${r.stderr()}`);
      const lines = r.stderr().trimEnd().split('\n');
      const last = lines.at(-1) as string;
      assert.match(last, expected);
      assert.match(last, /\[RF_REDIS_AUTH\]$/);
      assert.ok(ms < 5000, `${args.join(' ')}: took ${ms} ms (no retrying until --connect-timeout)`);
    }
  });

  it('no password in anything a run printed', () => {
    assert.ok(printed.length > 0);
    for (const pw of NEVER()) assert.equal(printed.includes(pw), false, 'a password appears in the output');
  });
});
