/**
 * `redfence lag` on the secured broker (dev/kafka.sh up s): SCRAM-SHA-512 over SASL_SSL with the
 * password from the environment reads the group's lag; a wrong password is RF_KAFKA_AUTH, exit 2, at once.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { uniqueName } from '../helpers/env.js';
import { createSecureTopics, LISTENERS, produceSecure, secret, tlsFile } from '../helpers/secure-kafka.js';

const ROOT = new URL('../..', import.meta.url).pathname;

function cli(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['--import', 'tsx', 'src/cli/bin.ts', 'lag', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      timeout: 60_000,
    });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => {
      out += d;
    });
    c.stderr.on('data', (d) => {
      err += d;
    });
    c.on('error', reject);
    c.on('close', (code) => resolve({ code, out, err }));
  });
}

describe('redfence lag on the secured Kafka', { timeout: 120_000 }, () => {
  const topic = uniqueName('lag-sec');
  const group = uniqueName('lag-sec-group');
  let drop: () => Promise<void> = async () => undefined;
  const scram = [
    '--brokers',
    LISTENERS.saslSsl,
    '--kafka-sasl-mechanism',
    'SCRAM-SHA-512',
    '--kafka-sasl-username',
    'redfence',
    '--kafka-ca',
    tlsFile('ca.crt'),
  ];

  before(async () => {
    drop = await createSecureTopics([{ topic, partitions: 1 }]);
    await produceSecure(
      topic,
      Array.from({ length: 10 }, (_, i) => ({ key: `k${i}`, value: 'v' })),
    );
    // committed through the internal listener: 3 of 10
    const c = new RdKafka.KafkaConsumer({ 'bootstrap.servers': LISTENERS.internal, 'group.id': group }, {});
    await new Promise<void>((resolve, reject) => c.connect({}, (e) => (e ? reject(e) : resolve())));
    try {
      c.commitSync([{ topic, partition: 0, offset: 3 }]);
    } finally {
      await new Promise<void>((r) => c.disconnect(() => r()));
    }
  });
  after(() => drop());

  it('SCRAM-SHA-512 over SASL_SSL: the lag read, STOP, exit 1; the password in no output', async () => {
    const r = await cli([...scram, '--group', group, '--samples', '2', '--interval', '100', '--json'], {
      REDFENCE_KAFKA_PASSWORD: secret('scram'),
    });
    assert.equal(r.code, 1, r.err);
    const report = JSON.parse(r.out) as { partitions: { status: string; lag: number }[] };
    assert.deepEqual(
      report.partitions.map((p) => [p.status, p.lag]),
      [['STOP', 7]],
    );
    assert.ok(!`${r.out}${r.err}`.includes(secret('scram')));
  });

  it('a wrong password: RF_KAFKA_AUTH, exit 2', async () => {
    const started = Date.now();
    const r = await cli([...scram, '--group', group], { REDFENCE_KAFKA_PASSWORD: 'not-the-password' });
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /\[RF_KAFKA_AUTH\]/);
    assert.ok(Date.now() - started < 30_000);
  });
});
