/**
 * The built CLI (dist/cli/bin.js, as users run it): help and version, every bad option refused with
 * exit 2 and one line before anything is connected (a listening socket stands in for Redis and Kafka
 * and must see no connection), modules of every extension loaded or refused with one coded line, and
 * an unreachable Redis ending fast with one coded line that shows no password.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RUN_HELP } from '../../src/cli/run-options.js';
import { REDIS_URL } from '../helpers/env.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

interface Result {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the built CLI with a clean Redfence environment (no REDIS_*, KAFKA_*, REDFENCE_* from ours). */
function cli(args: string[], env: NodeJS.ProcessEnv = {}, cwd?: string): Promise<Result> {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_)/.test(k)),
  );
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...base, ...env }, cwd });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** A TCP server that accepts and never answers: a connection attempt would be seen and would hang. */
let silent: Server;
let silentPort = 0;
const connections: Socket[] = [];
/** A port with nothing listening (bound once, then released). */
let closedPort = 0;
const dir = mkdtempSync(join(tmpdir(), 'redfence-cli-'));

before(async () => {
  silent = createServer((s) => {
    connections.push(s);
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  closedPort = (probe.address() as { port: number }).port;
  await new Promise<void>((r) => probe.close(() => r()));
});
after(async () => {
  for (const s of connections) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

const DEFINITION = `{ input: 'in', output: 'out', store: 'cli-test', reduce: (s, r) => ({ state: r }) }`;
function module(name: string, text: string): string {
  const file = join(dir, name);
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, text);
  return file;
}

/** Exactly one line on stderr, nothing on stdout. */
function oneLine(r: Result): string {
  assert.equal(r.stdout, '', r.stdout);
  assert.match(r.stderr, /^[^\n]+\n$/, `expected one line, got:\n${r.stderr}`);
  return r.stderr.trimEnd();
}

describe('redfence CLI', () => {
  it('--help prints usage and exits 0; --version prints the package version', async () => {
    const help = await cli(['--help']);
    assert.equal(help.status, 0);
    assert.match(help.stdout, /^redfence \d+\.\d+\.\d+/);
    assert.match(help.stdout, /Usage:/);
    const version = await cli(['--version']);
    assert.equal(version.stdout.trim(), pkg.version);
  });

  it('run --help prints the help generated from the option table', async () => {
    const r = await cli(['run', '--help']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, RUN_HELP);
    assert.match(r.stdout, /--create-topics/);
    assert.match(r.stdout, /--replication-factor <n>/);
  });

  it('an unknown command exits 2 and names it', async () => {
    const r = await cli(['frobnicate']);
    assert.equal(r.status, 2);
    assert.match(oneLine(r), /unknown command "frobnicate"/);
  });

  it('every bad option exits 2 with one line naming it, before any connection', async () => {
    const good = module('good.mjs', `export default ${DEFINITION};\n`);
    const redis = `redis://127.0.0.1:${silentPort}`;
    const brokers = `127.0.0.1:${silentPort}`;
    const workersConfig = join(dir, 'workers.json');
    writeFileSync(workersConfig, JSON.stringify({ workers: 100 }));
    const emptyFile = join(dir, 'empty');
    writeFileSync(emptyFile, '');
    const cases: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
      [['--mode', 'bogus'], {}, /^redfence run: --mode must be exactly-once or at-least-once, got "bogus"/],
      [['--session-timeout', 'abc'], {}, /^redfence run: --session-timeout must be an integer >= 1000/],
      [['--session-timeout', '999'], {}, /--session-timeout must be an integer >= 1000/],
      [['--group-commit-records', '-1'], {}, /--group-commit-records must be an integer >= 0, got "-1"/],
      [['--group-protocol', 'eager'], {}, /--group-protocol must be classic or consumer, got "eager"/],
      [['--metrics-port', '70000'], {}, /--metrics-port must be an integer >= 1 and <= 65535/],
      [['--shutdown-timeout', '1.5'], {}, /--shutdown-timeout must be an integer >= 1, got "1.5"/],
      [['--log', 'loud'], {}, /--log must be debug, info, warn, error or silent, got "loud"/],
      [['--brokers', 'nohost'], {}, /--brokers must be host:port\[,host:port\.\.\.\], got "nohost"/],
      [['--cluster', '127.0.0.1'], {}, /--cluster must be host:port/],
      [['--replication-factor', '0'], {}, /--replication-factor must be an integer >= 1/],
      [['--replication-factor', '2'], {}, /--replication-factor applies to the topics --create-topics makes/],
      [['--instance', 'a b'], {}, /--instance must be letters, digits/],
      [['--static'], {}, /--static needs --instance/],
      [['--sweep-every', '0'], {}, /--sweep-every must be an integer >= 1, got "0"/],
      [['--wait-replicas', '0'], {}, /--wait-replicas must be an integer >= 1 and <= 100, got "0"/],
      [['--wait-timeout', '500'], {}, /--wait-timeout applies to --wait-replicas/],
      [['--connect-timeout', 'soon'], {}, /--connect-timeout must be an integer >= 1/],
      [['--workers', '0'], {}, /--workers must be an integer >= 1 and <= 64, got "0"/],
      [['--workers', '65'], {}, /--workers must be an integer >= 1 and <= 64, got "65"/],
      [['--workers', '1.5'], {}, /--workers must be an integer >= 1 and <= 64, got "1.5"/],
      [['--workers', 'two'], {}, /--workers must be an integer >= 1 and <= 64, got "two"/],
      [['--workers'], {}, /--workers needs a value/],
      [[], { REDFENCE_WORKERS: '-2' }, /REDFENCE_WORKERS \(--workers\) must be an integer >= 1 and <= 64/],
      [
        ['--config', workersConfig],
        {},
        /--config .*workers\.json: "workers" must be an integer >= 1 and <= 64, got "100"/,
      ],
      [
        ['--workers', '2', '--metrics-port', '65535'],
        {},
        /--metrics-port 65535 with --workers 2: worker i serves on 65535\+i, and 65536 is above 65535/,
      ],
      [
        ['--workers', '3', '--instance', 'x'.repeat(199)],
        {},
        /--instance with --workers 3: worker ids are <instance>-<i>, and "x+-2" is longer than 200 characters/,
      ],
      [['--frobnicate', '1'], {}, /^redfence run: unknown option --frobnicate/],
      [['--create-topics=no'], {}, /--create-topics takes no value/],
      [
        [],
        { REDFENCE_SESSION_TIMEOUT_MS: 'abc' },
        /REDFENCE_SESSION_TIMEOUT_MS \(--session-timeout\) must be/,
      ],
      [['--cluster', brokers], { REDIS_CLUSTER_NODES: '' }, /--redis and --cluster exclude each other/],
      // the secure connection options (docs/operations.md, "Connecting securely")
      [
        ['--redis', `rediss://127.0.0.1:${silentPort}`, '--redis-ca', join(dir, 'absent.crt')],
        {},
        /--redis-ca .*absent\.crt: cannot read it \(no such file\)/,
      ],
      [['--redis-ca', workersConfig], {}, /--redis-ca needs TLS: a rediss:\/\/ URL/],
      [['--redis-tls'], {}, /--redis-tls with --redis: use a rediss:\/\/ URL instead/],
      [['--cluster', brokers, '--sentinels', brokers], {}, /--cluster and --sentinels exclude each other/],
      [['--sentinels', brokers], {}, /--sentinels needs --sentinel-name <name>/],
      [['--sentinel-name', 'm'], {}, /--sentinel-name applies to --sentinels/],
      [['--sentinel-user', 'u'], {}, /--sentinel-user applies to --sentinels/],
      [['--sentinel-tls'], {}, /--sentinel-tls applies to --sentinels/],
      [
        ['--sentinels', brokers, '--sentinel-name', 'm', '--sentinel-user', 'u'],
        {},
        /--sentinel-user needs its password: REDFENCE_SENTINEL_PASSWORD or --sentinel-password-file/,
      ],
      [
        ['--sentinels', brokers, '--sentinel-name', 'm', '--redis-ca', workersConfig],
        {},
        /--redis-ca needs TLS: add --redis-tls or --sentinel-tls/,
      ],
      [['--sentinels', 'nohost', '--sentinel-name', 'm'], {}, /--sentinels must be host:port/],
      [['--cluster', brokers, '--redis-ca', workersConfig], {}, /--redis-ca needs TLS: add --redis-tls/],
      [
        ['--cluster', brokers, '--redis-tls', '--redis-ca', workersConfig],
        {},
        /--redis-ca .*workers\.json: not a PEM certificate/,
      ],
      [
        ['--cluster', brokers, '--redis-tls', '--redis-cert', workersConfig],
        {},
        /--redis-cert needs --redis-key \(mutual TLS takes both\)/,
      ],
      [
        ['--redis-password-file', workersConfig],
        { REDFENCE_REDIS_PASSWORD: 'pw-in-env' },
        /--redis-password-file and REDFENCE_REDIS_PASSWORD both give a password/,
      ],
      [['--redis-password-file', emptyFile], {}, /--redis-password-file .*empty: the file is empty/],
      [
        ['--redis', `redis://u:url-pw@127.0.0.1:${silentPort}`],
        { REDFENCE_REDIS_PASSWORD: 'pw-in-env' },
        /the --redis URL has a password and REDFENCE_REDIS_PASSWORD or --redis-password-file gives another/,
      ],
    ];
    for (const [args, env, expected] of cases) {
      // --sentinels and --cluster with TLS options go without the --redis flag (a flag of each is refused)
      const alone =
        args.includes('--sentinels') ||
        (args.includes('--cluster') && args.some((a) => a.startsWith('--redis-')));
      const r = await cli(
        ['run', good, ...(alone ? [] : ['--redis', redis]), '--brokers', brokers, ...args],
        env,
      );
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      const line = oneLine(r);
      assert.match(line, expected);
      assert.match(line, /\[RF_INVALID_OPTIONS\]$/);
      assert.doesNotMatch(line, /url-pw|pw-in-env/);
      // far below the time a connection attempt to the silent port would take (5 s connect timeout)
      assert.ok(r.ms < 4000, `${args.join(' ')} took ${r.ms} ms`);
    }
    assert.equal(connections.length, 0, 'a refused option must not connect anywhere');
  });

  it('the issue case: --mode bogus against an unreachable Redis fails at once', async () => {
    const good = module('good2.mjs', `export default ${DEFINITION};\n`);
    const r = await cli(['run', good, '--mode', 'bogus', '--redis', 'redis://127.0.0.1:1']);
    assert.equal(r.status, 2);
    assert.equal(
      oneLine(r),
      'redfence run: --mode must be exactly-once or at-least-once, got "bogus" [RF_INVALID_OPTIONS]',
    );
  });

  it('--config: precedence end to end, unknown keys refused by name', async () => {
    const good = module('good3.mjs', `export default ${DEFINITION};\n`);
    const unreachable = ['--redis', `redis://127.0.0.1:${closedPort}`, '--connect-timeout', '200'];
    const bad = join(dir, 'bad-mode.json');
    writeFileSync(bad, JSON.stringify({ mode: 'bogus', log: 'silent' }));
    const fromFile = await cli(['run', good, ...unreachable, '--config', bad]);
    assert.equal(fromFile.status, 2);
    assert.match(
      oneLine(fromFile),
      /--config .*bad-mode\.json: "mode" must be exactly-once or at-least-once/,
    );
    // the environment beats the file, the flag beats the environment: both pass validation and go on to
    // Redis (which is unreachable, so the run ends there with its own code)
    const envWins = await cli(['run', good, ...unreachable, '--config', bad], {
      REDFENCE_MODE: 'at-least-once',
    });
    assert.match(oneLine(envWins), /\[RF_REDIS_UNAVAILABLE\]$/);
    const flagWins = await cli(['run', good, ...unreachable, '--mode', 'exactly-once'], {
      REDFENCE_CONFIG: bad,
      REDFENCE_MODE: 'twice',
    });
    assert.match(oneLine(flagWins), /\[RF_REDIS_UNAVAILABLE\]$/);
    const unknown = join(dir, 'unknown.json');
    writeFileSync(unknown, JSON.stringify({ mode: 'exactly-once', 'session-timout': 6000 }));
    const r = await cli(['run', good, '--config', unknown]);
    assert.equal(r.status, 2);
    assert.match(oneLine(r), /unknown key "session-timout" \(known: /);
    assert.equal(connections.length, 0);
  });

  it('loads .ts, .mts, .cts, .js, .mjs and .cjs processor modules (then stops at the unreachable Redis)', async () => {
    const ts = `enum Kind { Total = 1 }\nconst definition: { input: string; output: string; store: string; reduce: (s: unknown, r: { n: number }) => { state: number } } =\n  { input: 'in', output: 'out', store: 'cli-ts', reduce: (_s, r) => ({ state: r.n * Kind.Total }) };\n`;
    const modules = [
      module('esm/package.json', '{ "type": "module" }'),
      module('cjs/package.json', '{ "type": "commonjs" }'),
      module('esm/m.ts', `${ts}export default definition;\n`),
      // a .ts file in a CommonJS package, importing a sibling by its .js name (tsx resolves the .ts)
      module('cjs/def.ts', `${ts}export { definition };\n`),
      module('cjs/m.ts', `import { definition } from './def.js';\nexport default definition;\n`),
      module('cjs/m.mts', `${ts}export const processor = definition;\n`),
      module('esm/m.cts', `${ts}module.exports = { processor: definition };\n`),
      module('esm/m.js', `export default ${DEFINITION};\n`),
      module('cjs/m.js', `module.exports = ${DEFINITION};\n`),
      module('esm/m.mjs', `export const processor = ${DEFINITION};\n`),
      module('esm/m.cjs', `exports.default = ${DEFINITION};\n`),
    ].filter((f) => !f.endsWith('package.json') && !f.endsWith('def.ts'));
    const url = `redis://user:s3cret-pw@127.0.0.1:${closedPort}`;
    for (const file of modules) {
      const r = await cli(['run', file, '--redis', url, '--connect-timeout', '300', '--log', 'silent']);
      assert.equal(r.status, 1, `${file}: ${r.stderr}`);
      assert.match(
        oneLine(r),
        new RegExp(
          `^redfence run: Redis at redis://user:\\*\\*\\*@127\\.0\\.0\\.1:${closedPort} was not ready within 300 ms \\(connect ECONNREFUSED .*\\); .*\\[RF_REDIS_UNAVAILABLE\\]$`,
        ),
        file,
      );
    }
  });

  it('a module without a processor, with a bad definition, or that throws: one coded line, exit 2', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['none.mjs', 'export const x = 1;\n', /none\.mjs exports no processor: export default defineProcessor/],
      [
        'bad.mjs',
        `export default { input: 'in', output: 'out' };\n`,
        /bad\.mjs: processor definition: store /,
      ],
      ['fn.ts', 'export default () => 1;\n', /fn\.ts exports a function, not a processor definition/],
      [
        'throws.ts',
        `throw new Error('boom\\nsecond line');\n`,
        /throws\.ts failed to load: boom second line/,
      ],
      ['syntax.ts', 'export default {;\n', /syntax\.ts failed to load: /],
      [
        'data.json',
        '{}',
        /data\.json: a processor module must be a \.ts, \.mts, \.cts, \.js, \.mjs, \.cjs file/,
      ],
    ];
    for (const [name, text, expected] of cases) {
      const file = module(`bad/${name}`, text);
      const r = await cli(['run', file, '--redis', `redis://127.0.0.1:${silentPort}`]);
      assert.equal(r.status, 2, `${name}: ${r.stderr}`);
      const line = oneLine(r);
      assert.match(line, expected);
      assert.match(line, /\[RF_MODULE_INVALID\]$/);
    }
    const missing = await cli(['run', join(dir, 'absent.ts')]);
    assert.match(oneLine(missing), /absent\.ts: no such file \[RF_MODULE_INVALID\]$/);
    const none = await cli(['run']);
    assert.equal(none.status, 2);
    assert.match(oneLine(none), /missing <module>: redfence run <module> \[options\]/);
    assert.equal(connections.length, 0);
  });

  it('an unreachable Redis or Redis Cluster ends with one coded line within a few seconds, never a hang', async () => {
    const good = module('good4.mjs', `export default ${DEFINITION};\n`);
    const targets: Array<[string[], RegExp]> = [
      // nothing listens: every attempt is refused
      [
        ['--redis', `redis://:hunter2@127.0.0.1:${closedPort}`],
        /Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+/,
      ],
      // a socket that accepts and never answers
      [['--redis', `redis://127.0.0.1:${silentPort}`], /was not ready within 1500 ms/],
      [['--cluster', `127.0.0.1:${closedPort}`], /Redis Cluster at 127\.0\.0\.1:\d+ was not ready/],
    ];
    for (const [args, expected] of targets) {
      const r = await cli(['run', good, ...args, '--connect-timeout', '1500', '--log', 'silent']);
      assert.equal(r.status, 1, r.stderr);
      const line = oneLine(r);
      assert.match(line, expected);
      assert.match(line, /\[RF_REDIS_UNAVAILABLE\]$/);
      assert.doesNotMatch(line, /hunter2/);
      // the line names the 1,500 ms it waited (the flag was used); the clock only shows it ended rather
      // than hung (a loaded machine took 5.8 s here with three files running at once, so no tight bound)
      assert.ok(r.ms < 30_000, `took ${r.ms} ms`);
    }
    // with logs on, still no unhandled client error event and no password anywhere
    const logged = await cli([
      'run',
      good,
      '--redis',
      `redis://:hunter2@127.0.0.1:${closedPort}`,
      '--connect-timeout',
      '1500',
    ]);
    assert.doesNotMatch(logged.stderr + logged.stdout, /Unhandled error event|hunter2/);
    assert.match(logged.stderr, /\[RF_REDIS_UNAVAILABLE\]\n$/);
  });

  it('inspect and chaos refuse bad options the same way; inspect reads a real Redis', async () => {
    const seen = connections.length;
    const i = await cli(['inspect', 'store', 'key', '--connect-timeout', 'x']);
    assert.equal(i.status, 2);
    assert.match(oneLine(i), /^redfence inspect: --connect-timeout must be an integer >= 1/);
    const missing = await cli(['inspect', 'store']);
    assert.match(oneLine(missing), /missing <store> <key>/);
    const down = await cli([
      'inspect',
      'store',
      'key',
      '--redis',
      `redis://127.0.0.1:${closedPort}`,
      '--connect-timeout',
      '300',
    ]);
    assert.equal(down.status, 1);
    assert.match(oneLine(down), /\[RF_REDIS_UNAVAILABLE\]$/);
    const found = await cli(['inspect', 'cli-test-store', 'no-such-key', '--redis', REDIS_URL]);
    assert.equal(found.status, 3, found.stderr);
    assert.equal(JSON.parse(found.stdout).state, null);
    const c = await cli(['chaos', '--records', 'ten']);
    assert.equal(c.status, 2);
    assert.match(
      oneLine(c),
      /^redfence chaos: --records must be an integer >= 1, got "ten" \[RF_INVALID_OPTIONS\]$/,
    );
    assert.equal(connections.length, seen);
  });
});
