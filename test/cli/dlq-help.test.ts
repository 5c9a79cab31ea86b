import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { main } from '../../src/cli/main.js';

async function run(args: string[]) {
  let out = '';
  const code = await main(
    args,
    (s) => {
      out += s;
    },
    () => undefined,
  );
  return { code, out };
}

describe('redfence dlq --help', () => {
  it('the verb is listed, and each subcommand prints its options from its table', async () => {
    assert.match((await run(['--help'])).out, /redfence dlq <stats\|show\|replay>/);
    const top = await run(['dlq', '--help']);
    assert.equal(top.code, 0);
    assert.match(top.out, /stats .*\n.*show .*\n.*replay /);
    const replay = await run(['dlq', 'replay', '--help']);
    assert.equal(replay.code, 0);
    for (const flag of [
      '--topic',
      '--to',
      '--dry-run',
      '--rate',
      '--batch',
      '--marker-ttl',
      '--redis',
      '--offsets',
      '--since',
      '--kafka-config',
    ])
      assert.match(replay.out, new RegExp(`^  ${flag}( |$)`, 'm'), flag);
    const stats = await run(['dlq', 'stats', '--help']);
    assert.doesNotMatch(stats.out, /--dry-run|--redis /);
    assert.match((await run(['dlq', 'show', '--help'])).out, /--limit <n>/);
  });

  it('no subcommand prints the help and exits 2', async () => {
    const r = await run(['dlq']);
    assert.equal(r.code, 2);
    assert.match(r.out, /Usage: redfence dlq/);
  });
});
