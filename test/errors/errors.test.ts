import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ERROR_CODES, RedfenceError } from '../../src/index.js';

describe('RedfenceError', () => {
  it('carries a stable code, retriability and cause', () => {
    const cause = new Error('socket closed');
    const err = new RedfenceError('RF_REDIS_UNAVAILABLE', 'down', { cause });
    assert.equal(err.code, 'RF_REDIS_UNAVAILABLE');
    assert.equal(err.retriable, true);
    assert.equal(err.cause, cause);
    assert.ok(RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE'));
    assert.ok(!RedfenceError.is(err, 'RF_BAD_REPLY'));
    assert.ok(!RedfenceError.is(new Error('x')));
  });

  it('finds retriable errors anywhere on the cause chain', () => {
    const inner = new RedfenceError('RF_REDIS_UNAVAILABLE', 'down');
    assert.ok(RedfenceError.isRetriable(new Error('outer', { cause: inner })));
    assert.ok(!RedfenceError.isRetriable(new RedfenceError('RF_INVALID_ARGUMENT', 'bad')));
  });

  it('every code is documented in docs/errors.md', () => {
    const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    for (const code of Object.keys(ERROR_CODES)) {
      assert.match(doc, new RegExp(`\\b${code}\\b`), `${code} missing from docs/errors.md`);
    }
  });

  it('the library version equals package.json', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    const { VERSION } = await import('../../src/index.js');
    assert.equal(VERSION, pkg.version);
  });
});
