/** Exception classification: by class, by code, by predicate, along the cause chain, with the seed's defaults. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classify, RedfenceError } from '../../src/index.js';
import { checkClassifyRules } from '../../src/retry/classify.js';

class PaymentDeclined extends Error {}
class Timeout extends Error {}
const coded = (code: string | number) => Object.assign(new Error('x'), { code });

describe('classify', () => {
  it('defaults: decoding and validation errors are fatal, the rest retriable', () => {
    assert.equal(classify(new SyntaxError('Unexpected token')), 'fatal');
    assert.equal(classify(new RedfenceError('RF_HANDLER_DECODE', 'bad')), 'fatal');
    assert.equal(classify(Object.assign(new Error('bad'), { name: 'ValidationError' })), 'fatal');
    assert.equal(classify(Object.assign(new Error('bad'), { name: 'ZodError' })), 'fatal');
    assert.equal(classify(new Error('ECONNRESET')), 'retriable');
    // fetch's network failure is a TypeError: it must stay retriable
    assert.equal(classify(new TypeError('fetch failed')), 'retriable');
    assert.equal(classify('a string'), 'retriable');
  });

  it('an explicit retriable flag on the error (or a cause) decides before the defaults', () => {
    assert.equal(classify(new RedfenceError('RF_REDIS_UNAVAILABLE', 'down')), 'retriable');
    assert.equal(classify(new RedfenceError('RF_INVALID_ARGUMENT', 'no')), 'fatal');
    assert.equal(classify(Object.assign(new SyntaxError('x'), { retriable: true })), 'retriable');
    assert.equal(
      classify(new Error('wrapper', { cause: Object.assign(new Error('c'), { retriable: false }) })),
      'fatal',
    );
  });

  it('user rules by class, code and predicate, walking the cause chain; fatal rules first', () => {
    const rules = {
      fatal: { classes: [PaymentDeclined], codes: ['23505', 422] },
      retriable: { classes: [Timeout], when: (e: unknown) => (e as Error).message === 'again' },
    };
    assert.equal(classify(new PaymentDeclined('no'), rules), 'fatal');
    assert.equal(classify(new Error('wrap', { cause: new PaymentDeclined('no') }), rules), 'fatal');
    assert.equal(classify(coded('23505'), rules), 'fatal');
    assert.equal(classify(coded(422), rules), 'fatal');
    assert.equal(classify(coded('23503'), rules), 'retriable');
    // a user retriable rule beats the SyntaxError default
    assert.equal(classify(Object.assign(new SyntaxError('again')), rules), 'retriable');
    // both match: fatal wins
    assert.equal(classify(new Timeout('t', { cause: new PaymentDeclined('p') }), rules), 'fatal');
    assert.equal(classify(new Error('other'), { otherwise: 'fatal' }), 'fatal');
  });

  it('a throwing predicate matches nothing; a cause cycle ends', () => {
    const e = new Error('loop') as Error & { cause?: unknown };
    e.cause = e;
    assert.equal(
      classify(e, {
        fatal: {
          when: () => {
            throw new Error('bug');
          },
        },
      }),
      'retriable',
    );
  });

  it('bad rules are refused naming the path', () => {
    assert.throws(
      () => checkClassifyRules('classify', { fatal: { kinds: [] } }),
      /classify\.fatal\.kinds is not a known field/,
    );
    assert.throws(
      () => checkClassifyRules('classify', { otherwise: 'maybe' }),
      /classify\.otherwise must be/,
    );
    assert.throws(
      () => checkClassifyRules('classify', { retriable: { codes: [{}] } }),
      /classify\.retriable\.codes/,
    );
    assert.throws(
      () => checkClassifyRules('classify', { fatal: { classes: ['Error'] } }),
      /classify\.fatal\.classes/,
    );
  });
});
