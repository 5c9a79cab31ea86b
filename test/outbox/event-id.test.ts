/** outbox.eventId: the consumer-side dedup id of a record the relay published (its `id` header). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { outbox } from '../../src/index.js';

describe('outbox.eventId', () => {
  const id = '0b5c6f9e-2f1d-4c3b-9a8e-7d6c5b4a3f21';
  it('reads the id header, as a Buffer, a string or the first of a list, lower-cased', () => {
    assert.equal(outbox.eventId({ headers: { id: Buffer.from(id) } }), id);
    assert.equal(outbox.eventId({ headers: { id: id.toUpperCase() } }), id);
    assert.equal(outbox.eventId({ headers: { id: [Buffer.from(id), 'other'] } }), id);
  });
  it('refuses a record without the header or with something that is not a uuid, naming where it is', () => {
    for (const headers of [{}, { id: 'order-7' }, { id: '' }]) {
      assert.throws(
        () => outbox.eventId({ headers, topic: 'orders', offset: 12 }),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_INVALID_ARGUMENT') &&
          err.message.includes('orders offset 12') &&
          !err.message.includes('order-7'),
      );
    }
  });
});
