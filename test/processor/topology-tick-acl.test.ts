/**
 * The wall-clock close (`idleCloseMs`) under Kafka ACLs, on the secured broker (SASL_SSL, user
 * `redfence`): a tick is produced into the processor's own input partition, so it needs `Write` on the
 * input topic (docs/streams.md, "Closing the windows of an idle partition"). In exactly-once mode a
 * refused tick leaves the transactional producer unusable (the broker refuses to abort a transaction
 * it never opened: INVALID_TXN_STATE), which closed the processor at its first tick. With Write denied
 * there (and everything else allowed), start() is refused with RF_KAFKA_AUTH naming the topic, before
 * anything is consumed or produced. Once Write is allowed, a processor starts, its ticks close the last
 * windows, and every window's final count appears exactly once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { runModel } from '../../src/topology/model.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import {
  aclTool,
  createSecureTopics,
  LISTENERS,
  pem,
  produceSecure,
  readSecureToEnd,
  secret,
} from '../helpers/secure-kafka.js';
import { idleCount } from './fixtures/idle-close.js';
import {
  eventsAsInput,
  expectedFinals,
  finalsOf,
  IDLE_PARTITIONS,
  idleEvents,
  idleMessages,
} from './idle-close-helpers.js';

const USER = 'User:redfence';

describe('idleCloseMs under Kafka ACLs', { timeout: 180_000 }, () => {
  it('exactly-once: refused at start without Write on the input; once allowed, ticks close every window', async (t) => {
    const redis: Redis = standalone();
    const ns = uniqueName('tacl');
    const events = `${ns}-events`;
    const counts = `${ns}-counts`;
    t.after(
      await createSecureTopics([
        { topic: events, partitions: IDLE_PARTITIONS },
        { topic: counts, partitions: IDLE_PARTITIONS },
        { topic: `${events}.DLT`, partitions: 1 },
      ]),
    );
    t.after(async () => {
      const keys = await redis.keys(`rf:{${ns}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    // once a topic has an ACL, what is not allowed there is denied: allow all, deny Write
    await aclTool('--add', '--allow-principal', USER, '--operation', 'All', '--topic', events);
    await aclTool('--add', '--deny-principal', USER, '--operation', 'Write', '--topic', events);
    t.after(() => aclTool('--remove', '--force', '--topic', events).then(() => undefined));

    const sent = idleEvents(Math.floor((Date.now() - 5000) / 1000) * 1000);
    await produceSecure(events, idleMessages(sent));
    const want = expectedFinals(sent);
    const built = idleCount(ns);
    const alone = runModel(built, (await eventsAsInput(events, LISTENERS.internal)).input).outputs.length;
    assert.ok(alone > 0 && alone < want.size, `the records alone close ${alone} of ${want.size} windows`);

    const kafka = {
      brokers: [LISTENERS.saslSsl],
      sasl: { mechanism: 'SCRAM-SHA-512' as const, username: 'redfence', password: secret('scram') },
      ssl: { ca: pem('ca.crt') },
      sessionTimeoutMs: 6000,
    };
    const options = { topology: built, redis, mode: 'exactly-once' as const, idleCloseMs: 300, kafka };
    const denied = new TopologyProcessor(options);
    await assert.rejects(
      denied.start(),
      (e: unknown) =>
        RedfenceError.is(e, 'RF_KAFKA_AUTH') &&
        JSON.stringify((e.details as { topics?: unknown }).topics) === JSON.stringify([events]) &&
        String(e).includes(`may not write ${events}:`) &&
        /grant it Write/.test(String(e)),
      'refused at start, naming the topic',
    );
    await denied.close();
    assert.equal((await readSecureToEnd(counts)).length, 0, 'nothing processed');
    assert.equal((await eventsAsInput(events, LISTENERS.internal)).ticks.length, 0, 'no tick made');

    await aclTool('--remove', '--force', '--deny-principal', USER, '--operation', 'Write', '--topic', events);
    const p = new TopologyProcessor(options);
    await p.start();
    let stopped = false;
    t.after(() => (stopped ? undefined : p.close()));
    await pollUntil('every final result once Write is allowed', async () => {
      return (await readSecureToEnd(counts)).length >= want.size;
    });
    stopped = true;
    await p.close();
    assert.deepEqual(finalsOf(await readSecureToEnd(counts)), want, "every key's every window once");
    assert.ok(p.counts().ticksProduced > 0);
    assert.equal((await readSecureToEnd(`${events}.DLT`)).length, 0, 'no dead letter');
  });
});
