/**
 * The crash points' hook (src/processor/crash-points.ts): built by `redfence run` from
 * REDFENCE_CRASH_AT / REDFENCE_CRASH_AFTER, refused when either is wrong (a misspelt point would
 * otherwise make a crash test pass without crashing), and given to the processor only as an option.
 * test/processor/crash.test.ts shows each point killing a real instance.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { defineProcessor } from '../../src/index.js';
import { CRASH_POINTS, crashHookFromEnv } from '../../src/processor/crash-points.js';
import { resolveOptions } from '../../src/processor/options.js';
import { runCli } from '../helpers/cli.js';

describe('crash points', () => {
  it('no hook unless REDFENCE_CRASH_AT is set; a wrong point or count is RF_INVALID_OPTIONS naming it', () => {
    assert.equal(crashHookFromEnv({}), undefined);
    assert.equal(crashHookFromEnv({ REDFENCE_CRASH_AT: '' }), undefined);
    for (const point of CRASH_POINTS)
      assert.equal(typeof crashHookFromEnv({ REDFENCE_CRASH_AT: point }), 'function');
    assert.throws(
      () => crashHookFromEnv({ REDFENCE_CRASH_AT: 'after-comit' }),
      (e: Error & { code?: string }) =>
        e.code === 'RF_INVALID_OPTIONS' && /REDFENCE_CRASH_AT must be one of .*"after-comit"/.test(e.message),
    );
    for (const after of ['0', '-1', '1.5', 'x'])
      assert.throws(
        () => crashHookFromEnv({ REDFENCE_CRASH_AT: 'after-commit', REDFENCE_CRASH_AFTER: after }),
        (e: Error & { code?: string }) =>
          e.code === 'RF_INVALID_OPTIONS' &&
          e.message.includes(`REDFENCE_CRASH_AFTER must be a positive integer, got "${after}"`),
        after,
      );
  });

  it('the hook of another point never fires; the processor takes a hook only as a function', () => {
    const hook = crashHookFromEnv({ REDFENCE_CRASH_AT: 'after-commit', REDFENCE_CRASH_AFTER: '1' });
    // reaching other points must not kill this process
    for (const point of CRASH_POINTS) if (point !== 'after-commit') hook?.(point);
    const redis = new Redis({ lazyConnect: true });
    const definition = defineProcessor<{ amount: number }, number>({
      input: 'crash-in',
      output: 'crash-out',
      store: 'crash',
      operation: (o) => ({ op: 'add', by: o.amount }),
    });
    const base = { definition, redis, kafka: { brokers: ['127.0.0.1:1'] }, groupId: 'g' } as never;
    assert.equal(resolveOptions(base).crashHook, undefined);
    assert.throws(
      () => resolveOptions({ ...(base as object), crashHook: 'after-commit' } as never),
      /crashHook/,
    );
    redis.disconnect();
  });

  it('redfence run refuses a wrong REDFENCE_CRASH_AT with exit 2, before any connection', async () => {
    const saved = process.env.REDFENCE_CRASH_AT;
    process.env.REDFENCE_CRASH_AT = 'after-everything';
    try {
      const r = await runCli([
        'run',
        'examples/customer-totals.ts',
        '--brokers',
        '127.0.0.1:1',
        '--redis',
        'redis://127.0.0.1:1',
      ]);
      assert.equal(r.code, 2, r.out + r.err);
      assert.match(r.err, /REDFENCE_CRASH_AT must be one of .*\[RF_INVALID_OPTIONS\]/);
    } finally {
      if (saved === undefined) delete process.env.REDFENCE_CRASH_AT;
      else process.env.REDFENCE_CRASH_AT = saved;
    }
  });
});
