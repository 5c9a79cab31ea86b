/** userCaller: pure logic, no services. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { userCaller } from '../../src/processor/user-call.js';

const retriable = (message: string) => Object.assign(new Error(message), { retriable: true });

describe('userCaller', () => {
  it('returns synchronously when the function succeeds (no microtask per record)', () => {
    const call = userCaller(3, new AbortController().signal);
    const r = call(() => 42);
    assert.ok(!(r instanceof Promise), 'a plain result, not a promise');
    assert.deepEqual(r, { ok: true, value: 42 });
  });

  it('returns a non-retriable throw synchronously, without calling again', () => {
    const call = userCaller(3, new AbortController().signal);
    let calls = 0;
    const err = new Error('bad');
    const r = call(() => {
      calls++;
      throw err;
    });
    assert.ok(!(r instanceof Promise));
    assert.deepEqual(r, { ok: false, error: err });
    assert.equal(calls, 1);
  });

  it('retries a retriable throw up to `retries` times, then returns the last error', async () => {
    const call = userCaller(2, new AbortController().signal);
    let calls = 0;
    const r = call(() => {
      calls++;
      throw retriable(`attempt ${calls}`);
    });
    assert.ok(r instanceof Promise, 'a retry is asynchronous');
    const out = await r;
    assert.equal(calls, 3, 'the first call and two retries');
    assert.equal(out.ok, false);
    assert.equal((out as { error: Error }).error.message, 'attempt 3');
  });

  it('returns the value of a retry that succeeds', async () => {
    const call = userCaller(3, new AbortController().signal);
    let calls = 0;
    const out = await call(() => {
      calls++;
      if (calls < 2) throw retriable('once');
      return 'ok';
    });
    assert.deepEqual(out, { ok: true, value: 'ok' });
    assert.equal(calls, 2);
  });

  it('with retries 0 a retriable throw is returned at once', () => {
    const call = userCaller(0, new AbortController().signal);
    const r = call(() => {
      throw retriable('no retries');
    });
    assert.ok(!(r instanceof Promise));
    assert.equal((r as { ok: boolean }).ok, false);
  });
});
