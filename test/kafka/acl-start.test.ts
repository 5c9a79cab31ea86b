/**
 * A principal missing one permission a runtime needs is refused at start(), before any partition is
 * taken, with RF_KAFKA_AUTH naming the operation and the resource (details.missing) and what to grant:
 * the processor (both modes; with snapshots, their topic), the handler (with retry topics), the topology processor (both modes) and
 * the cache invalidation consumer,
 * on the secured broker, each case denying one operation on its own topic, group or transactional id
 * (everything else allowed). Topic and group permissions come from the brokers' authorized operations
 * (DescribeTopics / DescribeGroups); the transactional id's from its first use (InitProducerId), which
 * comes before the consumer joins. Nothing is committed in any case.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { createSecureTopics } from '../helpers/secure-kafka.js';
import {
  committedSum,
  countTopology,
  denyEach,
  Heard,
  handlerOf,
  invalidationOf,
  missingOf,
  names,
  processorOf,
  type Resource,
  type Runtime,
  retryTopicOf,
  topologyOf,
} from './acl-support.js';

type Kind =
  | 'processor-alo'
  | 'processor-eos'
  | 'processor-snapshot'
  | 'handler'
  | 'handler-retry'
  | 'topology-eos'
  | 'topology-alo'
  | 'invalidation';
type Target = 'input' | 'output' | 'dlt' | 'group' | 'txn' | 'retry' | 'repartition' | 'snapshot';

interface Case {
  readonly kind: Kind;
  readonly target: Target;
  readonly operation: 'Read' | 'Write' | 'Delete';
  readonly ns: string;
}

const CASES: Case[] = (
  [
    ['processor-alo', 'input', 'Read'],
    ['processor-alo', 'group', 'Read'],
    ['processor-alo', 'output', 'Write'],
    ['processor-alo', 'dlt', 'Write'],
    ['processor-eos', 'output', 'Write'],
    ['processor-eos', 'txn', 'Write'],
    ['processor-snapshot', 'snapshot', 'Write'],
    ['handler', 'input', 'Read'],
    ['handler', 'group', 'Read'],
    ['handler', 'dlt', 'Write'],
    ['handler-retry', 'retry', 'Write'],
    ['handler-retry', 'retry', 'Read'],
    ['topology-eos', 'input', 'Read'],
    ['topology-eos', 'output', 'Write'],
    ['topology-eos', 'repartition', 'Write'],
    ['topology-eos', 'repartition', 'Read'],
    ['topology-eos', 'repartition', 'Delete'],
    ['topology-eos', 'group', 'Read'],
    ['topology-eos', 'txn', 'Write'],
    ['topology-alo', 'dlt', 'Write'],
    ['invalidation', 'input', 'Read'],
    ['invalidation', 'group', 'Read'],
    ['invalidation', 'dlt', 'Write'],
  ] as const
).map(([kind, target, operation]) => ({ kind, target, operation, ns: uniqueName('aclst') }));

/** The resource a case denies, as AclCommand takes it and as RF_KAFKA_AUTH names it. */
function resourceOf(c: Case): { acl: Resource; named: string } {
  const n = names(c.ns);
  const topic = (t: string) => ({ acl: ['--topic', t], named: `${c.operation} topic ${t}` });
  switch (c.target) {
    case 'input':
      return topic(n.input);
    case 'output':
      return topic(n.output);
    case 'dlt':
      return topic(n.dlt);
    case 'snapshot':
      return topic(n.snapshot);
    case 'retry':
      return topic(retryTopicOf(c.ns));
    case 'repartition':
      return topic(countTopology(c.ns).repartitionTopics[0] as string);
    case 'group':
      return { acl: ['--group', n.group], named: `Read group ${n.group}` };
    case 'txn':
      return {
        acl: ['--transactional-id', n.transactionalId],
        named: `Write transactional-id ${n.transactionalId}`,
      };
  }
}

function topicsOf(c: Case): string[] {
  const n = names(c.ns);
  const extra = c.kind.startsWith('topology')
    ? countTopology(c.ns).repartitionTopics.slice()
    : c.kind === 'handler-retry'
      ? [retryTopicOf(c.ns)]
      : c.kind === 'processor-snapshot'
        ? [n.snapshot]
        : [];
  return [n.input, n.output, n.dlt, ...extra];
}

function runtimeOf(c: Case, redis: Redis, heard: Heard): Runtime {
  switch (c.kind) {
    case 'processor-alo':
      return processorOf(c.ns, redis, 'at-least-once', heard);
    case 'processor-eos':
      return processorOf(c.ns, redis, 'exactly-once', heard);
    case 'processor-snapshot':
      return processorOf(c.ns, redis, 'at-least-once', heard, names(c.ns).snapshot);
    case 'handler':
      return handlerOf(c.ns, heard, new Map());
    case 'handler-retry':
      return handlerOf(c.ns, heard, new Map(), true);
    case 'topology-eos':
      return topologyOf(c.ns, redis, 'exactly-once', heard);
    case 'topology-alo':
      return topologyOf(c.ns, redis, 'at-least-once', heard);
    case 'invalidation':
      return invalidationOf(c.ns, redis, heard);
  }
}

describe('a missing Kafka permission is refused at start, naming it', { timeout: 240_000 }, () => {
  let redis: Redis;
  let drop: (() => Promise<void>) | undefined;
  let grant: (() => Promise<void>) | undefined;
  before(async () => {
    redis = standalone();
    drop = await createSecureTopics(
      CASES.flatMap(topicsOf).map((topic) => ({ topic, partitions: topic.endsWith('.DLT') ? 1 : 2 })),
    );
    grant = await denyEach(CASES.map((c) => ({ resource: resourceOf(c).acl, operation: c.operation })));
  });
  after(async () => {
    await grant?.();
    await drop?.();
    for (const c of CASES) {
      const keys = await redis.keys(`rf:*${c.ns}*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis?.disconnect();
  });

  for (const c of CASES) {
    it(`${c.kind}: without ${c.operation} on the ${c.target}`, { timeout: 45_000 }, async () => {
      const heard = new Heard();
      const r = runtimeOf(c, redis, heard);
      const err = await r.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      await r.close();
      assert.ok(RedfenceError.is(err, 'RF_KAFKA_AUTH'), `RF_KAFKA_AUTH, got ${String(err)}`);
      const { named } = resourceOf(c);
      assert.deepEqual(missingOf(err), [named], 'names exactly the missing permission');
      assert.match(String((err as Error).message), /grant it that operation \(e\.g\. kafka-acls\.sh --add/);
      assert.equal(heard.fatals.length, 0, 'refused by start(), not closed while running');
      assert.equal(await committedSum(names(c.ns).group, names(c.ns).input), 0, 'nothing committed');
    });
  }
});
