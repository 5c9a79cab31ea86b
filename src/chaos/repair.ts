/**
 * The `repair` fault: drift in the store while the instances run, and `redfence reconcile --repair`'s own
 * code (readLog, readStore, readEpochs, reconcile, planRepairs, applyRepairs: src/ops/) run on it.
 *
 * 1. Drift: a few keys whose fence is below their partition's committed offset get a wrong value under
 *    the same fence fields (p, o, e kept; v replaced), as corruption would leave them; the write is a
 *    script that changes the key only if it is still as read. All but one are among the coldest keys
 *    (likely repaired before their owner writes them again); one is drawn from every key behind the
 *    commits, hot ones included (likely written again soon: its owner's cached token then meets the
 *    generation the repair bumped, or its owner rewrites it before the repair: `healed`, or between
 *    reconcile's read and the repair's write: `changed`).
 * 2. Repair, up to ATTEMPTS times: wait until the group has committed past each drifted key's fence (its
 *    fence now: the owner may have written it since), reconcile the drifted keys' partitions, and apply
 *    the plans of the drifted keys. planRepairs leaves a key whose fence is at a record past the
 *    committed offset (repairing it would undo records a running owner never receives again): held
 *    for the next attempt, so a running processor is repaired only behind its commits. A key the script finds `changed` (the owner
 *    wrote it between the read and the write) is tried again.
 * 3. The fault then waits (bounded) for the owners to write the repaired keys again (`rewritten`: the
 *    fence moved past the repaired one), which goes through the CONFLICT of their cached tokens.
 * 4. A drifted key the owner rewrote with its cached state (its token does not cover the value) is clean
 *    at the next reconcile: counted as healed, not repaired. Keys left (neither) are reported and fail the
 *    fault. Anomalies of keys the fault did not drift are counted by kind (a running processor's
 *    `stale-pending` entries are a lag; docs/operations.md) and never repaired here.
 *
 * The run's verifier then checks every key against its fold: a repaired key is right at the end only if
 * its owner read it again after the repair (the repair bumps the key's generation, so the owner's cached
 * token answers CONFLICT). Outputs are not repaired: an owner that reads a drifted key before its repair
 * (a new owner after a rebalance, a replay) folds on the wrong total and outputs it, as it would on real
 * corruption. The fault tells the run which customers it drifted (before writing), and the verifier
 * counts their outputs whose total is off by exactly the drift as the fault's effect, not a violation.
 */
import type { Cluster, Redis } from 'ioredis';
import { KeySpace } from '../keys/keys.js';
import { type PartitionRange, type Reconciliation, reconcile, type StoredKey } from '../ops/reconcile.js';
import { ExpectedFold } from '../ops/reconcile-fold.js';
import { applyRepairs, planRepairs } from '../ops/reconcile-repair.js';
import { readEpochs, readLog, readStore } from '../ops/reconcile-sources.js';
import { customerTotals } from './customer-totals.js';
import type { ConnectionConfig } from './kafka.js';
import { type RedisSide, verifierRedis } from './redis-topology.js';
import type { Fault } from './schedule.js';
import type { FaultFacts, Injected } from './verdict.js';

/** What the fault needs of the run besides the Redis side: the Kafka connection, names, commits. */
export interface RepairSide {
  brokers: string[];
  kafkaConfig?: ConnectionConfig;
  names: { input: string; output: string; store: string; group: string };
  /** The group's committed offsets on the input (next offset to consume, by partition). */
  committed(): Promise<Map<number, number>>;
  /** Told the customers (key ids) a fault drifted, before their drift can reach an output. */
  drifted(customers: readonly string[]): void;
}

/** Keys drifted per fault. */
export const KEYS_PER_FAULT = 3;
/** Reconcile + repair rounds before a drifted key is reported as left. */
export const ATTEMPTS = 5;
/** How long one round waits for the group to commit past the drifted keys' fences. */
const COMMIT_WAIT_MS = 30_000;

const DRIFT = `
local f = redis.call('HMGET', KEYS[1], 'p', 'o', 'e', 'v')
if tostring(f[1]) .. ':' .. tostring(f[2]) .. ':' .. tostring(f[3] or '0') ~= ARGV[1] then return 0 end
if f[4] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[3])
return 1`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function connect(side: RedisSide): Promise<Redis | Cluster> {
  const { Cluster, Redis } = await import('ioredis');
  const where = verifierRedis(side);
  const redis =
    'clusterPorts' in where
      ? new Cluster(
          where.clusterPorts.map((port) => ({ host: '127.0.0.1', port })),
          { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 3 } },
        )
      : new Redis(where.redisUrl, { maxRetriesPerRequest: 3, lazyConnect: true });
  await redis.connect();
  return redis;
}

/** What a drift adds to a stored total: far above any fold of the workload's amounts. */
export const DRIFT_TOTAL = 1_000_003;

/** The stored totals with a wrong total (a value no fold of the key gives: its count is kept). */
function wrongValue(v: Buffer): string {
  const t = JSON.parse(v.toString('utf8')) as { total: number; count: number };
  return JSON.stringify({ total: t.total + DRIFT_TOTAL, count: t.count });
}

/** How many times the drift reads the store again when no candidate key stayed as read. */
const DRIFT_TRIES = 5;

/** How long the fault waits for the owners to write the repaired keys again. */
const REWRITE_WAIT_MS = 10_000;

/** Drifts up to KEYS_PER_FAULT keys fenced below their partition's committed offset (redis key -> partition). */
async function drift(
  redis: Redis | Cluster,
  stored: readonly StoredKey[],
  committed: ReadonlyMap<number, number>,
  pick: number,
  told: RepairSide['drifted'],
): Promise<Map<string, number>> {
  const behind = (s: StoredKey) =>
    'corrupt' in s.state || s.state.value === null
      ? -1
      : (committed.get(s.state.partition) ?? 0) - s.state.offset;
  const all = stored
    .filter((s) => behind(s) > 0)
    .sort((a, b) => behind(b) - behind(a) || (a.redisKey < b.redisKey ? -1 : 1));
  const cold = all.slice(0, KEYS_PER_FAULT * 3);
  const any = all[pick % Math.max(1, all.length)];
  const order = [...(any ? [any] : []), ...cold.map((_, i) => cold[(pick + i) % cold.length] as StoredKey)];
  const drifted = new Map<string, number>();
  for (const s of order) {
    if (drifted.size >= KEYS_PER_FAULT) break;
    if ('corrupt' in s.state || s.state.value === null || drifted.has(s.redisKey)) continue;
    const st = s.state;
    const read = `${st.partition}:${st.offset}:${st.epoch}`;
    told([s.id]); // before the write: an owner may read the drifted value as soon as it is there
    const done = await redis.eval(
      DRIFT,
      1,
      s.redisKey,
      read,
      st.value as Buffer,
      wrongValue(st.value as Buffer),
    );
    if (Number(done) === 1) drifted.set(s.redisKey, st.partition);
  }
  return drifted;
}

/** Waits (bounded) until the group has committed past the fence each key has now. */
async function commitsPast(
  side: RepairSide,
  redis: Redis | Cluster,
  keys: Iterable<string>,
): Promise<boolean> {
  const until = Date.now() + COMMIT_WAIT_MS;
  for (;;) {
    const committed = await side.committed();
    let past = true;
    for (const k of keys) {
      const [p, o] = await redis.hmget(k, 'p', 'o');
      if (p !== null && o !== null && (committed.get(Number(p)) ?? 0) <= Number(o)) past = false;
    }
    if (past) return true;
    if (Date.now() > until) return false;
    await sleep(250); // pacing: polling the group's commits
  }
}

/** How many repaired keys their owner wrote again (fence past the repaired one), waiting for all (bounded). */
async function rewritten(redis: Redis | Cluster, repairedAt: ReadonlyMap<string, number>): Promise<number> {
  const until = Date.now() + REWRITE_WAIT_MS;
  for (;;) {
    let n = 0;
    for (const [k, at] of repairedAt) if (Number((await redis.hget(k, 'o')) ?? -1) > at) n++;
    if (n === repairedAt.size || Date.now() > until) return n;
    await sleep(250); // pacing: polling the repaired keys' fences
  }
}

interface Round {
  fold: ExpectedFold;
  ranges: Map<number, PartitionRange>;
  stored: StoredKey[];
  epochs: Map<number, number>;
  result: Reconciliation;
}

/** One reconcile of the partitions, as `redfence reconcile` runs it (src/cli/reconcile.ts). */
async function reconcileRound(
  side: RepairSide,
  redis: Redis | Cluster,
  keys: KeySpace,
  partitions: readonly number[],
): Promise<Round> {
  const { names } = side;
  const definition = customerTotals({ input: names.input, output: names.output, store: names.store });
  let fold: ExpectedFold | undefined;
  let stored: StoredKey[] = [];
  const ranges = await readLog({
    client: { brokers: side.brokers, clientId: 'redfence-chaos-repair', config: side.kafkaConfig ?? {} },
    topic: names.input,
    group: names.group,
    partitions,
    timeoutMs: 30_000,
    between: async (partitionCount) => {
      stored = await readStore(redis, keys);
      fold = new ExpectedFold(definition as never, keys, partitionCount);
    },
    onRecord: (r) => (fold as ExpectedFold).add(r),
  });
  const f = fold as ExpectedFold;
  const epochs = await readEpochs(redis, keys, names.input, ranges.keys());
  return { fold: f, ranges, stored, epochs, result: await reconcile(f, ranges, stored, epochs) };
}

export async function repairFault(
  side: RepairSide | undefined,
  redisSide: RedisSide,
  f: Fault,
): Promise<Injected> {
  if (side === undefined)
    return {
      outcome: 'skipped: not the orders workload',
      facts: { skipped: 'repair needs the orders workload' },
    };
  const redis = await connect(redisSide);
  try {
    const keys = new KeySpace({ store: side.names.store });
    // A key is drifted only if it is still as read; on a loaded machine its owner may write every
    // candidate between the read and the write (hot keys, slow steps), so the read is tried again
    let outstanding = new Map<string, number>();
    for (let tries = 0; tries < DRIFT_TRIES && outstanding.size === 0; tries++) {
      if (tries > 0) await sleep(500); // pacing: the owners' next commit may put keys behind it
      outstanding = await drift(
        redis,
        await readStore(redis, keys),
        await side.committed(),
        f.pick,
        side.drifted,
      );
    }
    const facts: FaultFacts = { drifted: outstanding.size, repaired: 0, changed: 0, healed: 0, held: 0 };
    const others = new Map<string, number>();
    const repairedAt = new Map<string, number>();
    let attempts = 0;
    while (outstanding.size > 0 && attempts < ATTEMPTS) {
      attempts++;
      await commitsPast(side, redis, outstanding.keys());
      const partitions = [...new Set(outstanding.values())].sort((a, b) => a - b);
      const round = await reconcileRound(side, redis, keys, partitions);
      const anomalous = new Set(round.result.anomalies.map((a) => a.key));
      for (const a of round.result.anomalies)
        if (!outstanding.has(a.key) && attempts === 1) others.set(a.kind, (others.get(a.kind) ?? 0) + 1);
      for (const v of round.result.verdicts)
        if (outstanding.has(v.redisKey) && !anomalous.has(v.redisKey) && v.status === 'clean') {
          outstanding.delete(v.redisKey);
          facts.healed = (facts.healed ?? 0) + 1;
        }
      // planRepairs leaves a key whose fence is past the committed offset (it would undo records the
      // running owner holds): held for the next round
      const { plans, skipped } = planRepairs(
        round.fold,
        round.ranges,
        round.stored,
        round.epochs,
        round.result,
      );
      const behind = plans.filter((p) => outstanding.has(p.redisKey));
      facts.held = (facts.held ?? 0) + skipped.filter((k) => outstanding.has(k.key)).length;
      const { repaired, changed } = await applyRepairs(redis as never, behind);
      for (const p of behind)
        if (repaired.includes(p.redisKey)) repairedAt.set(p.redisKey, p.target?.offset ?? -1);
      for (const k of repaired) outstanding.delete(k);
      facts.repaired = (facts.repaired ?? 0) + repaired.length;
      facts.changed = (facts.changed ?? 0) + changed.length;
    }
    facts.unrepaired = outstanding.size;
    facts.attempts = attempts;
    facts.rewritten = await rewritten(redis, repairedAt);
    const other = [...others].map(([k, n]) => `${k} ${n}`).join(', ');
    return {
      target: `${facts.drifted} keys`,
      outcome:
        `drifted ${facts.drifted}, repaired ${facts.repaired}, changed ${facts.changed} (retried), ` +
        `healed by their owner ${facts.healed}, held ${facts.held}, left ${facts.unrepaired} ` +
        `in ${attempts} round(s); ${facts.rewritten} repaired written again by their owner within ${REWRITE_WAIT_MS} ms${other ? `; other keys' anomalies (not repaired): ${other}` : ''}`,
      facts,
    };
  } finally {
    redis.disconnect();
  }
}
