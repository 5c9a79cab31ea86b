/**
 * What a runtime's principal may do under the brokers' ACLs (docs/operations.md, "Kafka ACLs"): the permissions a
 * runtime needs, the start-time check of those the brokers tell about (a topic's and a group's
 * authorized operations), and the one translation of an authorization refusal met while running
 * (librdkafka's TOPIC / GROUP / CLUSTER / TRANSACTIONAL_ID_AUTHORIZATION_FAILED) into RF_KAFKA_AUTH
 * naming the operation and the resource. A refusal is never waited out: redelivering a batch the
 * authorizer refuses only spins, so every runtime closes on it (nothing uncommitted is lost: the next
 * owner processes it again, once the permission is granted).
 */
import { RedfenceError } from '../errors/index.js';
import type { AuthorizedOperations, KafkaPort } from './types.js';

export type { AuthorizedOperations };

/** The Kafka ACL operations a runtime needs (Kafka's names). */
export type AclOperation = 'Read' | 'Write' | 'Create' | 'Delete' | 'Describe' | 'IdempotentWrite';

/** The Kafka ACL resource types a runtime uses. */
export type AclResource = 'topic' | 'group' | 'transactional-id' | 'cluster';

/** One permission a runtime needs, and what for. */
export interface Permission {
  readonly operation: AclOperation;
  readonly resource: AclResource;
  /** The topic, group or transactional id ('kafka-cluster' for the cluster). */
  readonly name: string;
  /** What the runtime does with it, e.g. 'the output it produces to'. */
  readonly why: string;
}

/** A topic permission. */
export function onTopic(operation: AclOperation, topic: string, why: string): Permission {
  return { operation, resource: 'topic', name: topic, why };
}

/** Read on the consumer group: joining it and committing its offsets. */
export function onGroup(group: string): Permission {
  return {
    operation: 'Read',
    resource: 'group',
    name: group,
    why: 'the consumer group: joining, committing',
  };
}

/** librdkafka's (and Kafka's) authorization error codes. */
const TOPIC_AUTHORIZATION_FAILED = 29;
const GROUP_AUTHORIZATION_FAILED = 30;
const CLUSTER_AUTHORIZATION_FAILED = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53;

/** The `--resource` flag of kafka-acls.sh for each resource type. */
const FLAG: Record<AclResource, string> = {
  topic: '--topic',
  group: '--group',
  'transactional-id': '--transactional-id',
  cluster: '--cluster',
};

function described(p: Permission): string {
  return `${p.operation} on ${p.resource} ${p.name} (${p.why})`;
}

function grantLine(p: Permission): string {
  const target = p.resource === 'cluster' ? FLAG.cluster : `${FLAG[p.resource]} ${p.name}`;
  return `kafka-acls.sh --add --allow-principal User:<principal> --operation ${p.operation} ${target}`;
}

/**
 * RF_KAFKA_AUTH naming every missing permission and what to grant; `details.missing` lists them,
 * `details.topics` the topics among them (sorted).
 */
export function permissionError(
  missing: readonly Permission[],
  when: string,
  cause?: unknown,
): RedfenceError {
  const topics = [...new Set(missing.filter((m) => m.resource === 'topic').map((m) => m.name))].sort();
  const first = missing[0] as Permission;
  return new RedfenceError(
    'RF_KAFKA_AUTH',
    `Kafka ACLs ${when}: this principal may not ${missing.map(described).join(', ')}: grant it ` +
      `${missing.length === 1 ? 'that operation' : 'those operations'} (e.g. ${grantLine(first)}; ` +
      'docs/operations.md, "Kafka ACLs", lists what each runtime needs)',
    {
      details: { missing: missing.map((m) => ({ ...m })), topics, when },
      ...(cause === undefined ? {} : { cause }),
    },
  );
}

/** Whether `ops` (the brokers' list for a resource) allows `operation`. */
function allows(ops: readonly string[], operation: AclOperation): boolean {
  if (ops.includes('All') || ops.includes(operation)) return true;
  // Kafka: Read, Write and Delete each imply Describe
  return operation === 'Describe' && ops.some((o) => o === 'Read' || o === 'Write' || o === 'Delete');
}

/**
 * The start-time check, before any partition is taken: every permission the brokers can tell about
 * (a topic's and the consumer group's authorized operations, KafkaPort.authorizedOperations) that they
 * do not allow is refused at once, all of them in one RF_KAFKA_AUTH. What the brokers tell nothing about
 * (a port without the method, no authorizer, a transactional id, a topic not created yet) is left to
 * its first use, which fails fast with RF_KAFKA_AUTH too (authRefusal).
 *
 * @example
 * await checkPermissions(port, [{ operation: 'Read', resource: 'topic', name: 'orders', why: 'the input' }], 'g');
 */
export async function checkPermissions(
  port: Pick<KafkaPort, 'authorizedOperations'>,
  needs: readonly Permission[],
  groupId?: string,
): Promise<void> {
  if (typeof port.authorizedOperations !== 'function' || needs.length === 0) return;
  const topics = [...new Set(needs.filter((n) => n.resource === 'topic').map((n) => n.name))];
  const wantsGroup = groupId !== undefined && needs.some((n) => n.resource === 'group' && n.name === groupId);
  const told = await port.authorizedOperations({ topics, ...(wantsGroup ? { group: groupId } : {}) });
  const missing: Permission[] = [];
  for (const n of needs) {
    const ops =
      n.resource === 'topic' ? told.topics.get(n.name) : n.resource === 'group' ? told.group : undefined;
    if (ops !== undefined && !allows(ops, n.operation)) missing.push(n);
  }
  if (missing.length > 0) throw permissionError(missing, 'refuse the start');
}

/** The librdkafka error code along `err`'s cause chain (a binding error or a KafkaJS one). */
function codeOf(err: unknown): number | undefined {
  for (let e = err, i = 0; e !== undefined && e !== null && i < 5; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'number') return c;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Where a refusal met while running came from, to name the resource. */
export interface RefusalContext {
  /** The operation on a topic that was refused (a produce: Write; a fetch: Read). */
  readonly topicOperation?: 'Read' | 'Write' | 'Create' | 'Delete' | 'Describe';
  readonly topic?: string;
  readonly group?: string;
  readonly transactionalId?: string;
  /** What the client was doing, e.g. 'while producing'. */
  readonly when: string;
}

/**
 * RF_KAFKA_AUTH for an authorization refusal (`err` or its cause), naming the operation and the
 * resource as far as `ctx` tells them; undefined for any other error. An RF_KAFKA_AUTH is returned as is.
 */
export function authRefusal(err: unknown, ctx: RefusalContext): RedfenceError | undefined {
  if (RedfenceError.is(err, 'RF_KAFKA_AUTH')) return err;
  const code = codeOf(err);
  let p: Permission;
  switch (code) {
    case TOPIC_AUTHORIZATION_FAILED:
      p = {
        operation: ctx.topicOperation ?? 'Write',
        resource: 'topic',
        name: ctx.topic ?? '(the topic)',
        why: 'refused by the brokers',
      };
      break;
    case GROUP_AUTHORIZATION_FAILED:
      p = {
        operation: 'Read',
        resource: 'group',
        name: ctx.group ?? '(the group)',
        why: 'the consumer group',
      };
      break;
    case TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      p = {
        operation: 'Write',
        resource: 'transactional-id',
        name: ctx.transactionalId ?? '(the transactional id)',
        why: 'exactly-once transactions',
      };
      break;
    case CLUSTER_AUTHORIZATION_FAILED:
      p = {
        operation: ctx.topicOperation === 'Create' ? 'Create' : 'IdempotentWrite',
        resource: 'cluster',
        name: 'kafka-cluster',
        why: 'refused by the brokers',
      };
      break;
    default:
      return undefined;
  }
  return permissionError([p], ctx.when, err);
}

/** True for an authorization refusal (RF_KAFKA_AUTH, or a librdkafka authorization error code). */
export function isAuthRefusal(err: unknown): boolean {
  return authRefusal(err, { when: '' }) !== undefined;
}

/**
 * A consumer's refusal naming several topics (librdkafka's error does not say which one) narrowed to
 * those whose authorized operations lack the refused one, as the brokers tell within `ms`; `err` as it
 * is when they tell nothing more, or for any other error.
 */
export async function narrowRefusal(
  err: RedfenceError,
  port: Pick<KafkaPort, 'authorizedOperations'>,
  ms = 5000,
): Promise<RedfenceError> {
  const first = (err.details?.missing as Permission[] | undefined)?.[0];
  if (first?.resource !== 'topic' || !first.name.includes(', ') || port.authorizedOperations === undefined)
    return err;
  const topics = first.name.split(', ');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
    timer.unref();
  });
  try {
    const told = await Promise.race([port.authorizedOperations({ topics }), late]);
    const refused = topics.filter((t) => {
      const ops = told?.topics.get(t);
      return ops !== undefined && !allows(ops, first.operation);
    });
    if (refused.length === 0) return err;
    return permissionError(
      refused.map((t) => ({ ...first, name: t })),
      String(err.details?.when ?? 'refuse the consumer'),
      err.cause,
    );
  } catch {
    return err;
  } finally {
    clearTimeout(timer);
  }
}
