/**
 * Carrying out one scheduled fault on a running chaos harness, through a narrow context (the instance
 * slots and the Redis servers). Each fault returns what it observed (facts, judged in verdict.ts) and a
 * line for people. The only sleeps are the schedule's pacing: how long a process or Redis stays down.
 */
import type { Exit } from '../harness/child.js';
import { pollUntil } from '../harness/poll.js';
import { redisCommand, redisInfo } from '../harness/redis-server.js';
import { clusterFailover, followSentinels, sentinelFailover } from './failover.js';
import type { Instance } from './instances.js';
import type { RedisSide } from './redis-topology.js';
import { type RepairSide, repairFault } from './repair.js';
import type { Fault } from './schedule.js';
import type { FaultFacts, Injected } from './verdict.js';

export interface Slot {
  id: string;
  generation: number;
  inst: Instance;
  /** An exit the harness caused (or awaits): the supervisor leaves it alone. */
  expecting: boolean;
}

export type { RedisSide };

export interface FaultContext {
  sessionTimeoutMs: number;
  crashTimeoutMs: number;
  redis: RedisSide;
  /** The orders workload's names and commits, for the repair fault (absent: a user's module). */
  repair?: RepairSide;
  slots: Slot[];
  live(): Slot[];
  addInstance(): Promise<Slot>;
  /** Starts the slot's next generation; without `env`, waits for `processor started`. */
  restart(slot: Slot, env?: Record<string, string>): Promise<void>;
  /** SIGTERM, waiting for the exit (SIGKILL after a bound: `forced`). */
  stopGracefully(slot: Slot): Promise<{ exit: Exit; forced: boolean }>;
  /** True once the input is all produced and committed (no batch will come). */
  inputDone(): Promise<boolean>;
  /**
   * True once the input is all produced or will be within 10 s (what is left to consume may then be a
   * batch or two by the time a restarted instance consumes).
   */
  inputProduced(): boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long past its session timeout a zombie stays stopped, so the coordinator has surely dropped it. */
const SESSION_MARGIN_MS = 2000;

/** How many partitions an instance owns by its log: those assigned less those revoked (incremental). */
function owned(inst: Instance): number {
  let n = 0;
  for (const l of inst.child.log.find(
    (x) => x.msg === 'partitions assigned' || x.msg === 'partitions revoked',
  )) {
    const k = Array.isArray(l.partitions) ? l.partitions.length : 0;
    n += l.msg === 'partitions assigned' ? k : -k;
  }
  return n;
}

function pickLive(c: FaultContext, f: Fault): Slot {
  const l = c.live().filter((s) => !s.expecting);
  if (l.length === 0) throw new Error('no live instance to inject a fault into');
  return l[f.pick % l.length] as Slot;
}

export async function inject(c: FaultContext, f: Fault): Promise<Injected> {
  switch (f.kind) {
    case 'kill':
      return kill(c, f);
    case 'crash':
      return crash(c, f);
    case 'zombie':
      return zombie(c, f);
    case 'redis-restart':
      return redisRestart(c, f);
    case 'redis-failover':
      return redisFailover(c, f);
    case 'scale':
      return scale(c, f);
    case 'repair':
      return repairFault(c.repair, c.redis, f);
  }
}

async function kill(c: FaultContext, f: Fault): Promise<Injected> {
  const s = pickLive(c, f);
  const name = s.inst.name;
  s.expecting = true;
  await s.inst.scrape();
  const exit = await s.inst.kill();
  if (exit.signal !== 'SIGKILL') {
    await c.restart(s);
    return { target: name, outcome: `had already exited ${JSON.stringify(exit)}`, facts: { exit } };
  }
  await sleep(f.pauseMs); // pacing: how long it stays down
  await c.restart(s);
  return {
    target: name,
    outcome: `killed, restarted after ${f.pauseMs} ms`,
    facts: { exit, restarted: true },
  };
}

async function crash(c: FaultContext, f: Fault): Promise<Injected> {
  // a crash point is reached only by a batch: with the input all produced and consumed, none comes
  if (await c.inputDone())
    return {
      outcome: 'skipped: input all produced and committed',
      facts: { skipped: 'the input was all produced and committed' },
    };
  const s = pickLive(c, f);
  const name = s.inst.name;
  // With the input (nearly) all produced, what is left may be a single batch by the time the armed
  // instance consumes: it then crashes at its first pass, so the point is reached whatever `after`
  // the schedule drew.
  await c.stopGracefully(s);
  const after = c.inputProduced() ? 1 : (f.after as number);
  await c.restart(s, { REDFENCE_CRASH_AT: f.point as string, REDFENCE_CRASH_AFTER: String(after) });
  s.expecting = true;
  const armed = s.inst;
  // The crash timeout counts from the armed instance's first partitions, not from its spawn: on a loaded
  // machine starting, joining the group and the rebalance can take most of it, and no batch (so no pass
  // of the point) comes before the partitions do. It gets as long again to be assigned any.
  const assigned = await pollUntil(
    'the armed instance to be assigned partitions',
    () =>
      !armed.alive ||
      armed.seen(
        (l) => l.msg === 'partitions assigned' && Array.isArray(l.partitions) && l.partitions.length > 0,
      ),
    c.crashTimeoutMs,
  ).then(
    () => armed.alive,
    () => false,
  );
  let outcome: string;
  const exit = await armed.waitExit(assigned || !armed.alive ? c.crashTimeoutMs : 1).catch(() => undefined);
  if (exit?.signal === 'SIGKILL') outcome = `crashed at ${f.point} (pass ${after})`;
  else if (exit) outcome = `exited ${JSON.stringify(exit)} before reaching ${f.point}`;
  else {
    await armed.scrape();
    await armed.kill();
    outcome = assigned
      ? `not reached within ${c.crashTimeoutMs} ms of its first partitions: SIGKILLed`
      : `not reached: no partition assigned within ${c.crashTimeoutMs} ms: SIGKILLed`;
  }
  await c.restart(s);
  return {
    target: `${name} -> ${armed.name}`,
    outcome,
    facts: { ...(exit ? { exit } : {}), restarted: true },
  };
}

async function zombie(c: FaultContext, f: Fault): Promise<Injected> {
  let helper: Slot | undefined;
  if (c.live().filter((s) => !s.expecting).length < 2) helper = await c.addInstance();
  // A zombie owns partitions when it is stopped: one with none (just started, its assignment still to
  // come) would lose nothing, and wake with nothing to notice.
  const candidates = () => c.live().filter((s) => !s.expecting && s !== helper);
  await pollUntil(
    'an instance owning partitions',
    () => candidates().some((x) => owned(x.inst) > 0),
    c.sessionTimeoutMs * 3 + 15_000,
  ).catch(() => undefined);
  const owners = candidates().filter((x) => owned(x.inst) > 0);
  const pool = owners.length > 0 ? owners : candidates();
  const s = pool[f.pick % pool.length] as Slot;
  const name = s.inst.name;
  s.expecting = true; // a zombie may die of its stale work (fatal Kafka error): not unexpected
  const others = c.live().filter((x) => x !== s);
  const marks = new Map(others.map((x) => [x, x.inst.count]));
  const stoppedAt = Date.now();
  s.inst.signal('SIGSTOP');
  const moved = await pollUntil(
    'its partitions to move',
    () =>
      others.some((x) =>
        x.inst.seen(
          (l) => l.msg === 'partitions assigned' && Array.isArray(l.partitions) && l.partitions.length > 0,
          marks.get(x) ?? 0,
        ),
      ),
    c.sessionTimeoutMs * 3 + 15_000,
  ).then(
    () => true,
    () => false,
  );
  const movedMs = Date.now() - stoppedAt;
  // Pacing: the new owners work while it sleeps. It stays stopped past its session timeout too (its
  // last heartbeat was before the SIGSTOP), so the coordinator has dropped it when it wakes: partitions
  // seen moving may come from another rebalance (an instance just started or stopped) well before that,
  // and a zombie woken inside its session keeps its membership and has nothing to notice.
  await sleep(Math.max(f.pauseMs, stoppedAt + c.sessionTimeoutMs + SESSION_MARGIN_MS - Date.now()));
  const mark = s.inst.count;
  s.inst.signal('SIGCONT');
  const wokeAt = Date.now();
  const stoppedMs = wokeAt - stoppedAt;
  const fenced = () => s.inst.seen((l) => /^FENCE/.test(l.msg ?? ''), mark);
  const rebalanced = () =>
    s.inst.seen((l) => l.msg === 'partitions revoked' || l.msg === 'partitions assigned', mark);
  const noticed = await pollUntil(
    'the zombie to notice',
    () => !s.inst.alive || fenced() || rebalanced(),
    60_000,
  ).then(
    () => true,
    () => false,
  );
  // A woken zombie's stale work may fail fatally a moment after it logs the rebalance or a FENCE: the
  // coordinator aborted its open transaction while it was stopped, so ending or aborting it fails
  // (RF_KAFKA_FATAL) and the processor closes with exit 1, as it is meant to. It stays expected until it
  // has rejoined or exited, and an exit is restarted here, within the fault: a restart left to the
  // supervisor could run beside the next fault (a Redis restart: it then exits at --connect-timeout).
  const rejoined = () => s.inst.seen((l) => l.msg === 'partitions assigned', mark);
  if (noticed && s.inst.alive)
    await pollUntil(
      'the zombie to rejoin or exit',
      () => !s.inst.alive || rejoined(),
      c.sessionTimeoutMs * 3 + 15_000,
    ).catch(() => undefined);
  const after = `${Date.now() - wokeAt} ms after SIGCONT`;
  const facts: FaultFacts = { partitionsMoved: moved };
  let what: string;
  if (!s.inst.alive) {
    // its last error line says why (a fatal Kafka error: `processor stopped after a fatal error`)
    const last = s.inst.child.log.find((l) => l.level === 'error', mark).at(-1);
    const why = last ? ` (${last.msg}: ${String(last.err ?? '').split('\n')[0]})` : '';
    what = `${fenced() ? 'FENCEd, then ' : ''}exited ${JSON.stringify(s.inst.exit)} ${after}${why}`;
    facts.woke = 'exited';
    await c.restart(s);
    facts.restarted = true;
  } else if (fenced()) {
    what = `FENCEd, ${rejoined() ? `rejoined ${after}` : `not rejoined ${after}`}`;
    facts.woke = 'fenced';
  } else if (noticed) {
    what = `woke, ${rejoined() ? `rejoined ${after}` : `not rejoined ${after}`}`;
    facts.woke = 'rebalanced';
  } else {
    // what it did log, and what it owned when stopped: the messages only (they carry no record values)
    const since = s.inst.child.log.find(() => true, mark).map((l) => l.msg ?? '?');
    const moves = (l: { msg?: string }) => l.msg === 'partitions assigned' || l.msg === 'partitions revoked';
    const all = s.inst.child.log.find(moves);
    const owned = all[all.length - s.inst.child.log.find(moves, mark).length - 1];
    const before = owned
      ? `last before the stop: ${owned.msg} ${JSON.stringify(owned.partitions)}`
      : 'no assignment before the stop';
    what = `woke, no FENCE or rebalance logged within 60 s (${before}; logged since: ${since.slice(-8).join(' | ') || 'nothing'})`;
    facts.woke = 'silent';
  }
  s.expecting = false;
  if (helper) {
    await c.stopGracefully(helper);
    c.slots.splice(c.slots.indexOf(helper), 1);
  }
  return {
    target: s.inst.name === name ? name : `${name} -> ${s.inst.name}`,
    outcome: `${moved ? `partitions moved after ${movedMs} ms` : 'partitions did not move'}, stopped ${stoppedMs} ms, ${what}${helper ? ' (helper instance added for it)' : ''}`,
    facts,
  };
}

async function redisRestart(c: FaultContext, f: Fault): Promise<Injected> {
  await followSentinels(c.redis); // the primary now, after an earlier restart that Sentinel took for a failure
  const marks = new Map(c.live().map((x) => [x, x.inst.count]));
  const target = c.redis.primary;
  const exit = await target.kill();
  const serverKilled = exit?.signal === 'SIGKILL';
  await sleep(f.pauseMs); // pacing: the outage
  await target.start();
  const outage = (x: Slot) => x.inst.seen((l) => /^Redis unavailable/.test(l.msg ?? ''), marks.get(x) ?? 0);
  const paused = c.live().filter(outage);
  const resumed = await Promise.all(
    paused.map((x) =>
      x.inst
        .waitFor(
          'Redis is back: resumed',
          (l) => l.msg === 'Redis is back: resumed',
          90_000,
          marks.get(x) ?? 0,
        )
        .then(
          () => true,
          () => false,
        ),
    ),
  );
  const n = resumed.filter(Boolean).length;
  const promoted = await followSentinels(c.redis);
  return {
    target: `redis :${target.port}`,
    outcome:
      `${serverKilled ? `down ${f.pauseMs} ms (SIGKILL, AOF always)` : 'was not running'}; ` +
      `${paused.length} logged the outage, ${n} resumed` +
      (promoted ? `; Sentinel promoted the replica :${c.redis.primary.port} meanwhile` : ''),
    facts: { serverKilled, serverBack: target.running, paused: paused.length, resumed: n },
  };
}

async function redisFailover(c: FaultContext, f: Fault): Promise<Injected> {
  const r = c.redis;
  if (r.topology === 'sentinel') return sentinelFailover(r, f);
  if (r.topology === 'cluster') return clusterFailover(r, f);
  if (!r.proxy || !r.replica) return { outcome: 'skipped: no replica', facts: { skipped: 'no replica' } };
  const old = r.primary;
  const next = r.replica;
  await pollUntil(
    'the replica to be linked to its primary',
    async () => /master_link_status:up/.test((await redisInfo(next.port, 'replication')) ?? ''),
    30_000,
  );
  const exit = await old.kill();
  await sleep(f.pauseMs);
  const promoted = (await redisCommand(next.port, 'REPLICAOF NO ONE')) === '+OK';
  r.proxy.switchTo({ host: '127.0.0.1', port: next.port });
  r.primary = next;
  r.replica = old;
  // the old primary comes back as a replica of the new one (its data is replaced)
  await old.restartAsReplicaOf(next.port);
  return {
    target: `redis :${old.port} -> :${next.port}`,
    outcome: `primary killed, replica ${promoted ? 'promoted' : 'NOT promoted'} (no WAIT)`,
    facts: { serverKilled: exit?.signal === 'SIGKILL', promoted, serverBack: old.running },
  };
}

async function scale(c: FaultContext, f: Fault): Promise<Injected> {
  const to = f.to ?? 1;
  const from = c.live().length;
  let stoppedCleanly = true;
  while (c.live().length < to) await c.addInstance();
  while (c.live().length > to) {
    const s = c.live().at(-1) as Slot;
    const { exit, forced } = await c.stopGracefully(s);
    if (forced || exit.code !== 0) stoppedCleanly = false;
    c.slots.splice(c.slots.indexOf(s), 1);
  }
  return {
    outcome: `${from} -> ${c.live().length} instances${stoppedCleanly ? '' : ' (one did not exit 0)'}`,
    facts: { instances: c.live().length, stoppedCleanly },
  };
}
