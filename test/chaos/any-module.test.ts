/**
 * `redfence chaos <module>`: a user's processor, a fault-free run and a faulted run over the same input,
 * compared key by key. Two fixture processors pass, at once (test/chaos/fixtures/): a JS reduce
 * (max-reading.mjs, exactly-once, its own chaosInput, a kill, a crash point, a Redis restart and a scale
 * step) and a built-in operation in TypeScript (word-count.ts, at-least-once, records from --input, a
 * kill and a crash point over two instances). A reduce that uses Math.random fails with exit 1 and names
 * its keys. Bad modules and input files exit 2 with a code, before any connection. The comparison's
 * rules (exactly-once multisets, at-least-once duplicates) are checked without services too.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { compare, type Snapshot } from '../../src/chaos/compare.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS } from '../helpers/env.js';

const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const fixture = (name: string) => join(FIXTURES, name);
const dir = mkdtempSync(join(tmpdir(), 'redfence-chaos-any-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const chaos = (args: string[]) => runCli(['chaos', ...args]);

const QUIET_FAULTS = ['--kills', '0', '--crashes', '0', '--zombies', '0', '--redis-restarts', '0'];
const common = ['--brokers', KAFKA_BROKERS, '--partitions', '3', '--session-timeout', '6000', '--quiet'];

/** Word records as JSON Lines: keys as strings and one as a JSON number, a few values not JSON. */
function wordsFile(n: number): string {
  const words = ['kafka', 'redis', 'fence', 'epoch', 'offset', 'batch', 'replay', 'zombie', 'crash'];
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    const word = words[(i * 7 + (i >> 3)) % words.length] as string;
    if (i % 250 === 17) lines.push(JSON.stringify({ key: word, value: '{not json' }));
    else if (i % 100 === 3) lines.push(JSON.stringify({ key: 42, value: { word: '42', n: 1 } }));
    else lines.push(JSON.stringify({ key: word, value: { word, n: 1 + (i % 3) } }));
    if (i % 500 === 0) lines.push('');
  }
  const file = join(dir, 'words.jsonl');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

describe('redfence chaos <module> against Kafka and its own Redis', { timeout: 300_000 }, () => {
  it('a JS reduce (exactly-once) and a built-in operation (at-least-once) pass under faults', async () => {
    const [reduce, operation] = await Promise.all([
      chaos([
        fixture('max-reading.mjs'),
        ...common,
        // seeds whose crash is the first fault, early in the window: the armed instance then has most
        // of the input ahead of it (a crash armed late can find nothing left to reach its point with)
        '--seed',
        '18',
        '--mode',
        'exactly-once',
        '--records',
        '3000',
        '--duration',
        '10',
        '--kills',
        '1',
        '--crashes',
        '1',
        '--zombies',
        '0',
        '--redis-restarts',
        '1',
        '--scale',
        '1,2',
      ]),
      chaos([
        fixture('word-count.ts'),
        ...common,
        '--seed',
        '20',
        '--mode',
        'at-least-once',
        '--input',
        wordsFile(2000),
        // 16 s: the crash's stop and armed restart (several seconds on a loaded machine, under tsx)
        // must leave input for the armed instance; in 8 s the other instance had consumed it all
        '--duration',
        '16',
        '--kills',
        '1',
        '--crashes',
        '1',
        '--zombies',
        '0',
        '--redis-restarts',
        '0',
        '--scale',
        '2',
      ]),
    ]);
    for (const r of [reduce, operation]) {
      assert.equal(r.code, 0, `${r.out}\n${r.err}`);
      assert.match(r.out, /VERDICT: OK/);
      assert.match(r.out, /\| differences: state +\| +0 \|/);
      assert.match(r.out, /\| differences: output +\| +0 \|/);
      assert.match(r.out, /\| kill +\| 1 of 1 \|/);
      assert.match(r.out, /\| crash [a-z-]+ +\| 1 of 1 \|/);
    }
    assert.match(reduce.out, /\| input records +\| +3000 \/ 3000 \|/);
    assert.match(reduce.out, /\| state keys compared +\| +40 \|/);
    assert.match(reduce.out, /\| redis-restart +\| 1 of 1 \|/);
    assert.match(reduce.out, /\| dead letters +\| +(\d+) \/ \1 \|/);
    assert.doesNotMatch(reduce.out, /\| dead letters +\| +0 \//, 'the poison records were dead-lettered');
    assert.match(operation.out, /\| input records +\| +2000 \/ 2000 \|/);
    assert.match(operation.out, /\| state keys compared +\| +10 \|/, 'nine words and the key 42');
    assert.match(operation.out, /duplicate outputs \(allowed\)/);
  });

  it('a reduce that uses Math.random fails with exit 1 and names the keys', async () => {
    const r = await chaos([
      fixture('random-total.mjs'),
      ...common,
      '--records',
      '300',
      '--duration',
      '1',
      ...QUIET_FAULTS,
      '--scale',
      '1',
    ]);
    assert.equal(r.code, 1, `${r.out}\n${r.err}`);
    assert.match(r.out, /VERDICT: FAILED/);
    assert.match(
      r.out,
      /DIFFERENCE \[state\] k-\d+: \{"total":[\d.]+\} in the faulted run, \{"total":[\d.]+\} in the reference run/,
    );
    assert.match(r.out, /DIFFERENCE \[output\] k-\d+: \d+ output values? differ/);
    assert.match(r.out, /\| keys that differ +\| +20 \|/);
    // bounded: at most 20 listed per check
    assert.ok((r.out.match(/DIFFERENCE \[state\]/g) ?? []).length <= 20);
  });
});

describe('redfence chaos <module>: bad modules and input files exit 2, before any connection', () => {
  // an unreachable broker: a connection attempt would fail differently (and slowly)
  const offline = ['--brokers', '127.0.0.1:1', '--quiet'];
  const cases: Array<[string, string[], RegExp]> = [
    ['no such module', [join(dir, 'nope.mjs')], /no such file \[RF_MODULE_INVALID\]/],
    ['not a module file', [join(dir, 'words.txt')], /must be a .* file \[RF_MODULE_INVALID\]/],
    ['a handler', [fixture('handler.mjs')], /exports a handler.*\[RF_MODULE_INVALID\]/],
    [
      'no chaosInput and no --input',
      [fixture('no-input.mjs')],
      /exports no chaosInput.*\[RF_MODULE_INVALID\]/,
    ],
    [
      '--input missing',
      [fixture('no-input.mjs'), '--input', join(dir, 'missing.jsonl')],
      /cannot be read \(ENOENT\) \[RF_INVALID_OPTIONS\]/,
    ],
    [
      '--input without a module',
      ['--input', join(dir, 'x.jsonl')],
      /--input applies to a module: .*\[RF_INVALID_OPTIONS\]/,
    ],
    [
      '--customers with a module',
      [fixture('max-reading.mjs'), '--customers', '5'],
      /--customers applies to the built-in orders workload/,
    ],
  ];
  for (const [what, args, message] of cases)
    it(what, async () => {
      const r = await chaos([...args, ...offline]);
      assert.equal(r.code, 2, `${r.out}\n${r.err}`);
      assert.match(r.err, message);
    });

  it('a line of --input that is not a record names the line', async () => {
    const file = join(dir, 'bad.jsonl');
    writeFileSync(file, '{"key":"a","value":1}\n\n{"key":"b"}\n');
    const r = await chaos([fixture('no-input.mjs'), '--input', file, ...offline]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /line 3: no "value" .*\[RF_INVALID_OPTIONS\]/);
    writeFileSync(file, '{"key":"a","value":1}\nnot json\n');
    const again = await chaos([fixture('no-input.mjs'), '--input', file, ...offline]);
    assert.equal(again.code, 2, again.err);
    assert.match(again.err, /line 2: not JSON \[RF_INVALID_OPTIONS\]/);
  });

  it('a chaosInput record without a value names the record', async () => {
    const file = join(dir, 'empty-input.mjs');
    writeFileSync(
      file,
      "export default { input: 'a', output: 'b', store: 'c', operation: () => ({ op: 'add', by: 1 }) };\nexport const chaosInput = () => [{ key: 'k' }];\n",
    );
    const r = await chaos([file, ...offline]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, /chaosInput record 0: no "value".*\[RF_MODULE_INVALID\]/);
  });
});

describe('the comparison rules', () => {
  const snap = (outputs: Array<[string, string, number]>, state: Array<[string, string]>): Snapshot => {
    const m = new Map<string, Map<string, number>>();
    for (const [k, v, n] of outputs) m.set(k, new Map([...(m.get(k) ?? []), [v, n]]));
    return {
      inputRecords: 3,
      committed: 3,
      endOffsets: 3,
      state: new Map(state),
      outputs: m,
      outputRecords: outputs.reduce((a, [, , n]) => a + n, 0),
      deadLetters: new Map(),
      deadLetterRecords: 0,
    };
  };
  const ref = snap(
    [
      ['a', '1', 1],
      ['a', '2', 1],
    ],
    [['a', '2']],
  );

  it('exactly-once: an output twice is a difference; at-least-once: an allowed duplicate', () => {
    const twice = snap(
      [
        ['a', '1', 2],
        ['a', '2', 1],
      ],
      [['a', '2']],
    );
    const eos = compare('exactly-once', ref, twice);
    assert.equal(eos.counts.get('output'), 1);
    assert.deepEqual(
      eos.differences.map((d) => d.key),
      ['a'],
    );
    const alo = compare('at-least-once', ref, twice);
    assert.equal(alo.counts.get('output') ?? 0, 0);
    assert.equal(alo.duplicateOutputs, 1);
  });

  it('a lost or a new output and a different state differ in either mode', () => {
    for (const mode of ['exactly-once', 'at-least-once'] as const) {
      const lost = compare(mode, ref, snap([['a', '2', 3]], [['a', '2']]));
      assert.equal(lost.counts.get('output'), 1, mode);
      const other = compare(
        mode,
        ref,
        snap(
          [
            ['a', '1', 1],
            ['a', '2', 1],
            ['b', '9', 1],
          ],
          [['a', '3']],
        ),
      );
      assert.equal(other.counts.get('output'), 1, mode);
      assert.equal(other.counts.get('state'), 1, mode);
      assert.equal(other.keysDiffering, 2, mode);
      assert.match(
        other.differences.find((d) => d.check === 'state')?.message ?? '',
        /^a: 3 in the faulted run, 2 in the reference run$/,
      );
    }
  });
});
