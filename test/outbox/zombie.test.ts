/**
 * The exactly-once zombie fence. A relay that lost its role while a transaction was open (frozen, cut
 * off) must not publish: the role's next holder initialises the role's transactional id, which aborts
 * the open transaction and refuses the old producer's commit. The zombie here is a transactional producer
 * with the role's id that has produced a pending row and not committed; a relay then takes the role,
 * publishes the row itself, and the zombie's commit fails: read_committed sees the row once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { DEFAULT_ROLES, enqueue, OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, readToEnd } from '../helpers/kafka.js';
import { deleteTopics, inTransaction, rows, type TestSchema, testSchema } from './support.js';

const cb = (fn: (done: (err: unknown) => void) => void) =>
  new Promise<void>((resolve, reject) => fn((err) => (err ? reject(err) : resolve())));

describe('exactly-once: a relay that lost its role cannot publish', () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  let relay: OutboxRelay | undefined;
  let zombie: InstanceType<typeof RdKafka.Producer> | undefined;
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxz');
    dropTopics = await createTopics([{ topic: `${prefix}.acct`, partitions: 2 }]);
  });
  after(async () => {
    await relay?.close();
    if (zombie) await cb((d) => zombie?.disconnect(d)).catch(() => undefined);
    await dropTopics?.();
    if (t) await deleteTopics([`${prefix}.progress`]);
    await t?.drop();
  });

  it("aborts the zombie's open transaction and refuses its commit", async () => {
    const [id] = await inTransaction(t.pool, (c) =>
      enqueue(
        c,
        { aggregateType: 'acct', aggregateId: 'z-1', type: 'moved', payload: { n: 1 } },
        { schema: t.schema },
      ),
    );
    const [row] = await rows(t.pool, t.schema);
    // the outbox was made with the default role count (testSchema passes none); a row's role is its
    // bucket modulo that count
    const roles = await t.pool.query(`SELECT count(*)::int AS n FROM "${t.schema}".redfence_outbox_role`);
    assert.equal(roles.rows[0].n, DEFAULT_ROLES, 'the outbox has the default number of roles');
    const bucket = await t.pool.query(`SELECT bucket FROM "${t.schema}".redfence_outbox WHERE id = $1`, [id]);
    const role = (bucket.rows[0].bucket as number) % DEFAULT_ROLES;
    // the zombie: the role's transactional producer, with the row produced in a transaction left open
    zombie = new RdKafka.Producer({
      'bootstrap.servers': KAFKA_BROKERS,
      'transactional.id': `${prefix}-${role}`,
      'transaction.timeout.ms': 60_000,
      dr_cb: true,
    });
    const z = zombie;
    await cb((d) => z.connect({}, d));
    z.setPollInBackground(true);
    await cb((d) => z.initTransactions(30_000, d));
    await cb((d) => z.beginTransaction(d));
    z.produce(`${prefix}.acct`, null, Buffer.from('{"n":1}'), 'z-1', null, undefined, [{ id: id as string }]);
    await cb((d) => z.flush(10_000, d));
    relay = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      mode: 'exactly-once',
      topicTemplate: `${prefix}.$\{aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      pollIntervalMs: 200,
    });
    await relay.start();
    await pollUntil(
      'the relay published the row',
      async () => (await rows(t.pool, t.schema))[0]?.state === 'published',
      60_000,
    );
    await assert.rejects(
      cb((d) => z.commitTransaction(10_000, d)),
      'the zombie cannot commit',
    );
    // the relay published the row under the zombie's role: its progress record (partition <role>)
    // names it, so the zombie held the row's own transactional id
    const progress = await readToEnd(`${prefix}.progress`);
    assert.deepEqual(
      progress
        .filter(
          (r) => r.value !== null && (JSON.parse(r.value) as { ids: string[] }).ids.includes(String(id)),
        )
        .map((r) => r.partition),
      [role],
      "the row's role is the zombie's",
    );
    const out = await readToEnd(`${prefix}.acct`);
    assert.deepEqual(
      out.map((r) => String(r.headers.id)),
      [row?.id],
      'the row once, from the relay',
    );
  });
});
