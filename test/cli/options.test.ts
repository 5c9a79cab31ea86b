/**
 * The CLI's option tables and their parser, in process: precedence (flags > environment > --config file
 * > defaults), refusals naming the option, the config file's checks, and help generated from the table.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseChaosArgs } from '../../src/cli/chaos.js';
import { CHAOS_HELP, CHAOS_OPTIONS } from '../../src/cli/chaos-options.js';
import { INSPECT_HELP, INSPECT_OPTIONS } from '../../src/cli/inspect.js';
import { parseOptions, type Table } from '../../src/cli/options.js';
import { redisTarget, showRedisUrl } from '../../src/cli/redis.js';
import { processorSettings } from '../../src/cli/run.js';
import { RUN_HELP, RUN_OPTIONS } from '../../src/cli/run-options.js';
import { topologySettings } from '../../src/cli/run-topology.js';
import {
  STATE_GET_HELP,
  STATE_GET_OPTIONS,
  STATE_WINDOWS_HELP,
  STATE_WINDOWS_OPTIONS,
} from '../../src/cli/state.js';
import { RedfenceError } from '../../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'redfence-cli-options-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
function config(content: unknown): string {
  const file = join(dir, `config-${files++}.json`);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

/** Asserts `fn` throws RF_INVALID_OPTIONS with exactly `message`. */
function refuses(fn: () => unknown, message: string | RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(RedfenceError.is(err, 'RF_INVALID_OPTIONS'), String(err));
    if (typeof message === 'string') assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  });
}

const run = (args: string[], env: NodeJS.ProcessEnv = {}) => parseOptions(RUN_OPTIONS, args, env);

describe('CLI options', () => {
  it('defaults fill what no source gives; options without a default stay unset', () => {
    const { values, sources, positionals } = run(['m.ts']);
    assert.deepEqual(positionals, ['m.ts']);
    assert.equal(values.mode, 'exactly-once');
    assert.deepEqual(values.brokers, ['127.0.0.1:9092']);
    assert.equal(values.redis, 'redis://127.0.0.1:6379');
    assert.equal(values['shutdown-timeout'], 15_000);
    assert.equal(values.static, false);
    assert.equal(values['session-timeout'], undefined);
    assert.equal(values['create-topics'], false);
    assert.equal(sources.mode, 'default');
    assert.equal(sources['session-timeout'], undefined);
  });

  it('precedence: flags > environment > config file > defaults, per option', () => {
    const file = config({ mode: 'at-least-once', 'session-timeout': 7000, group: 'from-file', log: 'warn' });
    const env = { REDFENCE_SESSION_TIMEOUT_MS: '8000', REDFENCE_GROUP: 'from-env' };
    const { values, sources } = run(['m.ts', '--config', file, '--group', 'from-flag'], env);
    assert.equal(values.group, 'from-flag');
    assert.equal(sources.group, 'flag');
    assert.equal(values['session-timeout'], 8000);
    assert.equal(sources['session-timeout'], 'env');
    assert.equal(values.mode, 'at-least-once');
    assert.equal(sources.mode, 'config');
    assert.equal(values.log, 'warn');
    assert.equal(values['shutdown-timeout'], 15_000);
    assert.equal(sources['shutdown-timeout'], 'default');
    // REDFENCE_CONFIG names the file when --config does not; an empty variable counts as unset
    const viaEnv = run(['m.ts'], { REDFENCE_CONFIG: file, REDFENCE_GROUP: '' });
    assert.equal(viaEnv.values.group, 'from-file');
  });

  it('a config file takes numbers, booleans and lists as JSON; --no-<switch> turns a switch off', () => {
    const file = config({ brokers: ['a:1', 'b:2'], static: true, instance: 'i-1', 'metrics-port': 9464 });
    const { values } = run(['m.ts', '--config', file]);
    assert.deepEqual(values.brokers, ['a:1', 'b:2']);
    assert.equal(values.static, true);
    assert.equal(values['metrics-port'], 9464);
    assert.equal(run(['m.ts', '--config', file, '--no-static']).values.static, false);
    assert.equal(run(['m.ts', '--no-static'], { REDFENCE_STATIC: '1' }).values.static, false);
    assert.equal(run(['m.ts'], { REDFENCE_STATIC: 'true' }).values.static, true);
  });

  it('a config file with unknown keys, a bad value or bad JSON is refused, naming the key', () => {
    const unknown = config({ mode: 'at-least-once', brokres: 'x:1', colour: 'red' });
    refuses(
      () => run(['m.ts', '--config', unknown]),
      new RegExp(`^--config ${unknown}: unknown keys "brokres", "colour" \\(known: brokers, redis, `),
    );
    const one = config({ config: 'other.json' });
    refuses(() => run(['m.ts', '--config', one]), /: unknown key "config"/);
    const bad = config({ mode: 'twice' });
    refuses(
      () => run(['m.ts', '--config', bad]),
      `--config ${bad}: "mode" must be exactly-once or at-least-once, got "twice"`,
    );
    const wrongType = config({ static: 'yes' });
    refuses(
      () => run(['m.ts', '--config', wrongType]),
      `--config ${wrongType}: "static" must be true or false`,
    );
    const nested = config({ brokers: { a: 1 } });
    refuses(() => run(['m.ts', '--config', nested]), /"brokers" must be a string or number/);
    refuses(() => run(['m.ts', '--config', config('{"mode": ')]), /^--config .*: .*JSON/);
    refuses(() => run(['m.ts', '--config', config('[1]')]), /must hold a JSON object/);
    refuses(() => run(['m.ts', '--config', join(dir, 'absent.json')]), /absent\.json: no such file$/);
  });

  it('a bad value names its source: the flag, the environment variable or the config key', () => {
    refuses(
      () => run(['m.ts', '--session-timeout', 'abc']),
      '--session-timeout must be an integer >= 1000 and <= 3600000, got "abc"',
    );
    refuses(
      () => run(['m.ts'], { REDFENCE_MODE: 'bogus' }),
      'REDFENCE_MODE (--mode) must be exactly-once or at-least-once, got "bogus"',
    );
    refuses(() => run(['m.ts'], { REDFENCE_STATIC: 'yes' }), /^REDFENCE_STATIC \(--static\) must be true, 1/);
    // a flag wins over a bad environment value, which is then not looked at
    assert.equal(
      run(['m.ts', '--mode', 'at-least-once'], { REDFENCE_MODE: 'bogus' }).values.mode,
      'at-least-once',
    );
  });

  it('unknown flags are refused all at once; missing values and values on switches too', () => {
    refuses(() => run(['m.ts', '--frobnicate', '1', '--colour']), 'unknown options --frobnicate, --colour');
    refuses(() => run(['m.ts', '-x']), 'unknown option -x');
    refuses(() => run(['m.ts', '--mode']), '--mode needs a value');
    refuses(() => run(['m.ts', '--group', '--mode', 'x']), '--group needs a value');
    refuses(() => run(['m.ts', '--static=yes']), '--static takes no value');
    assert.equal(run(['m.ts', '--mode=at-least-once']).values.mode, 'at-least-once');
  });

  it('every value option of every verb refuses a bad value with what it accepts', () => {
    const bad: Record<string, string> = { redis: 'http://x', instance: 'a b', group: '' };
    // a file name can be anything but empty
    for (const f of ['redis-ca', 'redis-cert', 'redis-key', 'redis-password-file', 'sentinel-password-file'])
      bad[f] = '';
    for (const f of [
      'kafka-ca',
      'kafka-cert',
      'kafka-key',
      'kafka-sasl-password-file',
      'kafka-key-password-file',
    ])
      bad[f] = '';
    for (const [verb, table] of Object.entries({
      run: RUN_OPTIONS,
      inspect: INSPECT_OPTIONS,
      chaos: CHAOS_OPTIONS,
      'state windows': STATE_WINDOWS_OPTIONS,
    }) as Array<[string, Table]>) {
      for (const [name, spec] of Object.entries(table)) {
        if (spec.kind === 'switch') continue;
        const value = bad[name] ?? (name === 'report' || name === 'input' ? '' : 'bogus,');
        assert.throws(
          () => parseOptions(table, [`--${name}`, value], {}),
          (err: unknown) => {
            assert.ok(RedfenceError.is(err, 'RF_INVALID_OPTIONS'), `${verb} --${name}: ${String(err)}`);
            assert.ok(err.message.startsWith(`--${name}`), `${verb} --${name}: ${err.message}`);
            if (name !== 'points')
              assert.ok(err.message.includes(`must be ${spec.allowed}, got `), err.message);
            return true;
          },
          `${verb} --${name} ${JSON.stringify(value)}`,
        );
      }
    }
  });

  it('flags map to the processor options: --create-topics, --replication-factor and the rest', () => {
    const { values } = run([
      'm.ts',
      '--create-topics',
      '--replication-factor',
      '3',
      '--static',
      '--instance',
      'i-7',
      '--session-timeout',
      '6000',
      '--group-protocol',
      'consumer',
      '--max-batch-size',
      '500',
      '--transaction-timeout',
      '20000',
      '--group',
      'g',
      '--group-commit-records',
      '0',
      '--user-retries',
      '5',
      '--sweep-every',
      '7',
      '--wait-replicas',
      '1',
      '--allow-eviction',
      '--mode',
      'at-least-once',
    ]);
    assert.deepEqual(processorSettings(values, 'i-7'), {
      kafka: {
        brokers: ['127.0.0.1:9092'],
        sessionTimeoutMs: 6000,
        groupInstanceId: 'i-7',
        groupProtocol: 'consumer',
        maxBatchSize: 500,
        transactionTimeoutMs: 20000,
      },
      mode: 'at-least-once',
      instanceId: 'i-7',
      requireNoEviction: false,
      groupId: 'g',
      groupCommitRecords: 0,
      userRetries: 5,
      sweepEvery: 7,
      waitReplicas: { replicas: 1, timeoutMs: 1000 },
      createTopics: true,
      replicationFactor: 3,
    });
    // nothing given: only what the CLI decides; the processor keeps its own defaults
    assert.deepEqual(processorSettings(run(['m.ts']).values, 'x'), {
      kafka: { brokers: ['127.0.0.1:9092'] },
      mode: 'exactly-once',
      instanceId: 'x',
      requireNoEviction: true,
    });
    // snapshots and tracing: from flags or the environment (the topic's variable is rebuild's too)
    const snap = run(['m.ts', '--snapshot-interval', '500', '--snapshot-rate', '2000', '--tracing'], {
      REDFENCE_SNAPSHOT_TOPIC: 'totals-snap',
    }).values;
    const { snapshot, tracing } = processorSettings(snap, 'x');
    assert.deepEqual(snapshot, { intervalMs: 500, topic: 'totals-snap', maxKeysPerSecond: 2000 });
    assert.equal(tracing, true);
    assert.deepEqual(processorSettings(run(['m.ts', '--snapshot-interval', '100']).values, 'x').snapshot, {
      intervalMs: 100,
    });
    // a topology module takes the same snapshot settings
    assert.deepEqual(topologySettings(processorSettings(snap, 'x')).snapshot, {
      intervalMs: 500,
      topic: 'totals-snap',
      maxKeysPerSecond: 2000,
    });
  });

  it('--redis and --cluster: the stronger source wins, the same source twice is refused', () => {
    const env = { REDIS_CLUSTER_NODES: '127.0.0.1:7001,127.0.0.1:7002', REDIS_URL: 'redis://127.0.0.1:6390' };
    const flagBeatsEnv = run(['m.ts', '--redis', 'redis://127.0.0.1:6391'], env);
    assert.deepEqual(redisTarget(flagBeatsEnv.values, flagBeatsEnv.sources), {
      kind: 'standalone',
      url: 'redis://127.0.0.1:6391',
    });
    const clusterFlag = run(['m.ts', '--cluster', '[::1]:7001,h:7002'], env);
    assert.deepEqual(redisTarget(clusterFlag.values, clusterFlag.sources), {
      kind: 'cluster',
      nodes: [
        { host: '::1', port: 7001 },
        { host: 'h', port: 7002 },
      ],
    });
    const both = run(['m.ts'], env);
    refuses(() => redisTarget(both.values, both.sources), /REDIS_URL and REDIS_CLUSTER_NODES/);
    const onlyCluster = run(['m.ts'], { REDIS_CLUSTER_NODES: 'h:7001' });
    assert.equal(redisTarget(onlyCluster.values, onlyCluster.sources).kind, 'cluster');
  });

  it('a Redis password never appears in a refusal', () => {
    refuses(
      () => run(['m.ts', '--redis', 'http://user:s3cret@127.0.0.1:1']),
      '--redis must be a redis:// or rediss:// URL, got "http://user:***@127.0.0.1:1/"',
    );
    assert.equal(showRedisUrl('rediss://:pw@h:1/2'), 'rediss://:***@h:1/2');
    assert.equal(showRedisUrl('not a url with p@ss'), '<unparsable URL>');
  });

  it('--help is generated from the table: every option, its environment variable and default', () => {
    for (const [help, table] of [
      [RUN_HELP, RUN_OPTIONS],
      [INSPECT_HELP, INSPECT_OPTIONS],
      [CHAOS_HELP, CHAOS_OPTIONS],
      [STATE_GET_HELP, STATE_GET_OPTIONS],
      [STATE_WINDOWS_HELP, STATE_WINDOWS_OPTIONS],
    ] as Array<[string, Table]>) {
      const flat = help.replace(/\n\s+/g, ' ');
      for (const [name, spec] of Object.entries(table)) {
        assert.match(
          help,
          new RegExp(`^  --${name}${spec.placeholder ? ` ${spec.placeholder}` : ''}( |$)`, 'm'),
        );
        assert.ok(flat.includes(spec.description), `${name}: ${spec.description}`);
        if (spec.env) assert.ok(flat.includes(`env ${spec.env}`), `${name}: env ${spec.env}`);
        if (spec.defaultText) assert.ok(flat.includes(`default ${spec.defaultText}`), name);
      }
      assert.match(help, /--config <file>/);
      assert.match(help, /flags > environment > --config file > defaults/);
    }
    assert.match(RUN_HELP, /exactly-once \| at-least-once/);
    // --help answers even when a value is bad
    assert.equal(run(['--help', '--mode', 'bogus']).help, true);
  });

  it('chaos keeps its flags: defaults, modes, points and the harness option names', () => {
    const p = parseChaosArgs(
      ['--mode', 'both', '--scale', '1,3,2', '--records', '50', '--duration', '2.5'],
      {},
    );
    assert.deepEqual(p.modes, ['exactly-once', 'at-least-once']);
    assert.deepEqual(p.options, {
      scale: [1, 3, 2],
      records: 50,
      durationS: 2.5,
      redisTopology: 'standalone',
    });
    assert.deepEqual(p.brokers, ['127.0.0.1:19092']);
    assert.deepEqual(parseChaosArgs([], { KAFKA_BROKERS: 'k:1' }).brokers, ['k:1']);
    refuses(
      () => parseChaosArgs(['--points', 'after-lunch'], {}),
      /^--points: unknown crash point "after-lunch"/,
    );
    // one argument is a processor module (redfence chaos <module>), a second is refused
    assert.equal(parseChaosArgs(['m.mjs'], {}).module, 'm.mjs');
    refuses(() => parseChaosArgs(['m.mjs', 'extra'], {}), 'unexpected argument "extra"');
  });
});
