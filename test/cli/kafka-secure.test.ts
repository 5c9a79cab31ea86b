/**
 * `redfence run` (the built CLI) against the secured broker of `dev/kafka.sh up s`: end to end with
 * SCRAM-SHA-512 over SASL_SSL (password from REDFENCE_KAFKA_PASSWORD) and with mutual TLS (an encrypted
 * key, its password from --kafka-key-password-file), outputs counted; a wrong password and an untrusted
 * CA stop it with RF_KAFKA_AUTH from the auth watch (not a connect timeout) (exit 2); a refused --kafka-config key exits 2 before
 * anything connects; a handler module takes the same options; `redfence chaos` runs its harness and instances over SCRAM; no password, key material or key password in anything it printed or served on
 * /metrics.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort } from '../../src/harness/port.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';
import {
  createSecureTopics,
  LISTENERS,
  produceSecure,
  readSecureToEnd,
  secret,
  tlsFile,
  waitSecureCommitted,
} from '../helpers/secure-kafka.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'redfence-kafka-secure-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The secrets, and a line of each private key's base64 body. */
const NEVER = () => [
  secret('scram'),
  secret('plain'),
  secret('key'),
  ...['client.key', 'client-enc.key'].map((f) => readFileSync(tlsFile(f), 'utf8').split('\n')[1] as string),
];

interface Run {
  child: ChildProcess;
  stderr: () => string;
  /** Everything it printed (stdout and stderr). */
  printed: () => string;
  exited: Promise<number | null>;
}

/** No secret, key line or key password in `text` (what one run printed or served). */
function assertNoSecrets(text: string): void {
  assert.ok(text.length > 0, 'the run printed something to scan');
  for (const s of NEVER()) assert.equal(text.includes(s), false, 'a secret appears in the output');
}
function start(args: string[], env: NodeJS.ProcessEnv = {}): Run {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_)/.test(k)),
  );
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let printed = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
    printed += d.toString();
  });
  child.stdout?.on('data', (d: Buffer) => {
    printed += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, stderr: () => err, printed: () => printed, exited };
}

/**
 * Waits for the run's "processor started" line; fails at once if the run exits first, and either way
 * with the end of what it printed on stderr (checked for secrets first), so a slow or failed start says why.
 */
async function waitStarted(run: Run, timeoutMs: number): Promise<void> {
  let exit: number | null | undefined;
  void run.exited.then((code) => {
    exit = code;
  });
  try {
    await pollUntil(
      'the processor started',
      () => {
        if (run.stderr().includes('"msg":"processor started"')) return true;
        if (exit !== undefined) throw new Error(`the run exited (code ${exit}) before it started`);
        return false;
      },
      timeoutMs,
    );
  } catch (err) {
    const printed = run.stderr();
    if (printed.length > 0) assertNoSecrets(printed);
    throw new Error(`${(err as Error).message}; its stderr ended with:\n${printed.slice(-3000)}`);
  }
}

function moduleFor(ns: string): string {
  const module = join(dir, `${ns}.mjs`);
  writeFileSync(
    module,
    `export default { input: '${ns}-in', output: '${ns}-out', store: '${ns}', reduce: (s) => ({ state: { count: (s?.count ?? 0) + 1 } }) };\n`,
  );
  return module;
}

async function runProcessor(kafkaArgs: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const ns = uniqueName('ksec');
  const drop = await createSecureTopics(
    [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 2 })),
  );
  const port = await freePort();
  const run = start(
    [
      'run',
      moduleFor(ns),
      '--redis',
      REDIS_URL,
      '--group',
      ns,
      '--session-timeout',
      '6000',
      '--metrics-port',
      String(port),
      ...kafkaArgs,
    ],
    env,
  );
  try {
    await waitStarted(run, 60_000);
    await produceSecure(
      `${ns}-in`,
      Array.from({ length: 40 }, (_, i) => ({ key: `k${i % 4}`, value: JSON.stringify({ i }) })),
    );
    await waitSecureCommitted(ns, `${ns}-in`);
    // Exactly-once (the default mode): each key's outputs are its counts 1..10, in order, each once.
    const perKey = new Map(Array.from({ length: 4 }, (_, k) => [`k${k}`, 10]));
    assertPerKey('outputs', await readSecureToEnd(`${ns}-out`), countOf, countsUpTo(perKey), {
      ordered: true,
    });
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert.match(metrics, /redfence_/);
    run.child.kill('SIGTERM');
    assert.equal(await run.exited, 0, run.stderr());
    assert.doesNotMatch(run.stderr(), /Unhandled error event|"level":"error"/);
    assertNoSecrets(run.printed() + metrics);
  } finally {
    run.child.kill('SIGKILL');
    await drop();
  }
}

/** SCRAM-SHA-512 over SASL_SSL as user redfence, the broker's CA trusted (the password is the caller's). */
const SCRAM = [
  '--kafka-sasl-mechanism',
  'SCRAM-SHA-512',
  '--kafka-sasl-username',
  'redfence',
  '--kafka-ca',
  tlsFile('ca.crt'),
];

describe('redfence run on the secured Kafka', { timeout: 240_000 }, () => {
  it('SCRAM-SHA-512 over SASL_SSL, the password from REDFENCE_KAFKA_PASSWORD', () =>
    runProcessor(['--brokers', LISTENERS.saslSsl, ...SCRAM], { REDFENCE_KAFKA_PASSWORD: secret('scram') }));

  it('mutual TLS with an encrypted key, its password from --kafka-key-password-file', () => {
    const pwFile = join(dir, 'key.password');
    writeFileSync(pwFile, `${secret('key')}\n`, { mode: 0o600 });
    return runProcessor(
      [
        '--brokers',
        LISTENERS.ssl,
        '--kafka-ca',
        tlsFile('ca.crt'),
        '--kafka-cert',
        tlsFile('client.crt'),
        '--kafka-key',
        tlsFile('client-enc.key'),
        '--kafka-key-password-file',
        pwFile,
        '--kafka-config',
        'socket.keepalive.enable=true',
      ],
      {},
    );
  });

  const failing: Array<[string, string[], NodeJS.ProcessEnv, RegExp]> = [
    [
      'a wrong SCRAM password',
      [...SCRAM],
      { REDFENCE_KAFKA_PASSWORD: 'not-the-password' },
      /SASL authentication error.*\[RF_KAFKA_AUTH\]/,
    ],
    [
      "a CA that did not sign the broker's certificate",
      [
        '--kafka-sasl-mechanism',
        'SCRAM-SHA-512',
        '--kafka-sasl-username',
        'redfence',
        '--kafka-ca',
        tlsFile('other-ca.crt'),
      ],
      { REDFENCE_KAFKA_PASSWORD: secret('scram') },
      /certificate verify failed.*--kafka-ca.*\[RF_KAFKA_AUTH\]/,
    ],
  ];
  for (const [what, args, env, message] of failing) {
    it(`${what}: exit 2 with RF_KAFKA_AUTH (the auth watch, not a connect timeout)`, async () => {
      const ns = uniqueName('kfail');
      const drop = await createSecureTopics(
        [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
      );
      try {
        const r = start(
          ['run', moduleFor(ns), '--redis', REDIS_URL, '--brokers', LISTENERS.saslSsl, ...args],
          env,
        );
        assert.equal(await r.exited, 2, r.stderr());
        assert.match(r.stderr(), message);
        assertNoSecrets(r.printed());
        const given = env.REDFENCE_KAFKA_PASSWORD;
        if (given) assert.equal(r.printed().includes(given), false, 'the given password is printed');
      } finally {
        await drop();
      }
    });
  }

  it('a handler module gets the Kafka options too: a wrong SCRAM password exits 2 with RF_KAFKA_AUTH', async () => {
    const ns = uniqueName('khfail');
    const drop = await createSecureTopics(
      [`${ns}-in`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
    );
    const module = join(dir, `${ns}-handler.mjs`);
    writeFileSync(
      module,
      `export default { name: '${ns}', input: '${ns}-in', handle: async () => undefined };\n`,
    );
    try {
      const r = start(['run', module, '--brokers', LISTENERS.saslSsl, ...SCRAM], {
        REDFENCE_KAFKA_PASSWORD: 'not-the-password',
      });
      const timer = setTimeout(() => r.child.kill('SIGKILL'), 30_000);
      const code = await r.exited;
      clearTimeout(timer);
      assert.equal(code, 2, r.stderr());
      assert.match(r.stderr(), /SASL authentication error.*\[RF_KAFKA_AUTH\]/);
      assertNoSecrets(r.printed());
    } finally {
      await drop();
    }
  });

  it('a refused --kafka-config key exits 2 before anything connects', async () => {
    // nothing listens on either port: any connection attempt would fail differently
    const r = start([
      'run',
      moduleFor(uniqueName('krefused')),
      '--redis',
      'redis://127.0.0.1:1',
      '--brokers',
      '127.0.0.1:1',
      '--kafka-config',
      'linger.ms=5',
      '--kafka-config',
      'enable.auto.commit=true',
    ]);
    assert.equal(await r.exited, 2);
    assert.match(
      r.stderr(),
      /--kafka-config may not set "enable.auto.commit": offsets are committed only after the outputs are produced.*\[RF_INVALID_OPTIONS\]/,
    );
  });

  it('redfence chaos passes the Kafka options to its own clients and to every instance', async () => {
    const r = start(
      [
        'chaos',
        '--brokers',
        LISTENERS.saslSsl,
        ...SCRAM,
        ...['--records', '300', '--duration', '2', '--partitions', '3', '--customers', '20', '--large', '0'],
        ...['--kills', '1', '--crashes', '0', '--zombies', '0', '--redis-restarts', '0'],
        ...['--redis-failovers', '0', '--scale', '2', '--quiet'],
      ],
      { REDFENCE_KAFKA_PASSWORD: secret('scram') },
    );
    let out = '';
    r.child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    assert.equal(await r.exited, 0, `${out}\n${r.stderr()}`);
    assert.match(out, /VERDICT: OK/);
    assert.match(out, /committed \/ end offsets\s*\|\s*300 \/ 300/);
    assertNoSecrets(r.printed());
  });

  it('a password given for the wrong user is not printed either (exit 2, RF_KAFKA_AUTH)', async () => {
    // The PLAIN user's password presented as the SCRAM user's: refused, and not echoed in the error.
    const r = start(
      [
        'run',
        moduleFor(uniqueName('kwrong')),
        '--redis',
        REDIS_URL,
        '--brokers',
        LISTENERS.saslSsl,
        ...SCRAM,
      ],
      { REDFENCE_KAFKA_PASSWORD: secret('plain') },
    );
    assert.equal(await r.exited, 2, r.stderr());
    assert.match(r.stderr(), /SASL authentication error.*\[RF_KAFKA_AUTH\]/);
    assertNoSecrets(r.printed());
  });
});
