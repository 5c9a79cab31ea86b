/**
 * The Redis failover faults of the Sentinel and Cluster topologies (src/chaos/redis-topology.ts). Each
 * waits until a failover can succeed (the replica known and linked), SIGKILLs the primary (or one
 * cluster master) and leaves the promotion to Redis itself: the Sentinels (`+switch-master`, seen as
 * SENTINEL GET-MASTER-ADDR-BY-NAME naming the replica) or the cluster (the replica flagged master and
 * cluster_state:ok again). Then the killed server restarts on its own directory and rejoins as a
 * replica. Whether the processor loses anything depends on `--wait-replicas`: the writes a primary
 * acknowledged but had not yet sent to its replica are gone after the promotion.
 */
import { pollUntil } from '../harness/poll.js';
import { type RedisServer, redisCommand, redisInfo } from '../harness/redis-server.js';
import {
  clusterNodes,
  clusterOk,
  linkedReplicas,
  masterPorts,
  type RedisSide,
  sentinelsReady,
  sentinelsView,
} from './redis-topology.js';
import type { Fault } from './schedule.js';
import type { Injected } from './verdict.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const within = (what: string, check: () => Promise<boolean>, ms: number, every = 100) =>
  pollUntil(what, check, ms, every).then(
    () => true,
    () => false,
  );
// 3 s to answer: a replica applying its primary's stream with an fsync per write is slow on a busy disk
const linkedToPrimary = async (port: number) => {
  const info = (await redisInfo(port, 'replication', 3000)) ?? '';
  return /role:slave/.test(info) && /master_link_status:up/.test(info);
};

/** What a server says of its replication, in one line (for an outcome that did not rejoin). */
async function replicationLine(port: number): Promise<string> {
  const info = await redisInfo(port, 'replication', 3000);
  if (info === undefined) return `:${port} no answer`;
  const fields = ['role', 'master_port', 'master_link_status', 'master_sync_in_progress', 'connected_slaves'];
  const seen = info
    .split(/\r?\n/)
    .filter((l) => fields.some((f) => l.startsWith(`${f}:`)))
    .map((l) => l.trim());
  return `:${port} ${seen.join(' ')}`;
}

/**
 * Cuts the replication link for `ms` before the primary dies (pacing: how far the replica falls behind):
 * the replica is given credentials the primary does not know, so once the primary drops its replica
 * connections it cannot sync again, while the primary goes on acknowledging writes. (A SIGSTOPped
 * replica would not do: what the primary sends waits in the socket buffers and arrives after SIGCONT.)
 * `relink` gives the replica back its empty credentials.
 */
async function lagBehind(primary: RedisServer, replica: RedisServer, ms: number): Promise<string> {
  if (ms <= 0) return '';
  await redisCommand(replica.port, 'CONFIG SET masteruser rf-chaos-cut');
  await redisCommand(replica.port, 'CONFIG SET masterauth rf-chaos-cut');
  await redisCommand(primary.port, 'CLIENT KILL TYPE replica');
  await sleep(ms);
  return `replication cut ${ms} ms before, `;
}

async function relink(replica: RedisServer): Promise<void> {
  await redisCommand(replica.port, 'CONFIG SET masteruser ""');
  await redisCommand(replica.port, 'CONFIG SET masterauth ""');
}

/**
 * Sentinel: the side's primary and replica as the Sentinels name them now. A `redis-restart` longer
 * than their down-after time (1 s) is a failover too: they promote the replica while the primary is
 * down, and the restarted server rejoins as its replica. Without this, a later fault would aim at the
 * old primary (a restart with no outage, a failover waiting for Sentinels that name another primary).
 * Returns true when the roles were swapped.
 */
export async function followSentinels(r: RedisSide): Promise<boolean> {
  const sentinel = r.sentinels?.[0];
  const replica = r.replica;
  if (r.topology !== 'sentinel' || !sentinel || !replica) return false;
  if ((await sentinel.primaryPort()) !== replica.port) return false;
  r.replica = r.primary;
  r.primary = replica;
  return true;
}

export async function sentinelFailover(r: RedisSide, f: Fault): Promise<Injected> {
  await followSentinels(r);
  const old = r.primary;
  const next = r.replica;
  const sentinel = r.sentinels?.[0];
  if (!next || !sentinel) return { outcome: 'skipped: no replica', facts: { skipped: 'no replica' } };
  if (!(await within('the sentinels to know the replica, linked', () => sentinelsReady(r), 60_000, 200)))
    return {
      outcome: `skipped: the sentinels never saw the replica linked (${await replicationLine(next.port)}; ${await sentinelsView(r)})`,
      facts: { skipped: 'replica not linked' },
    };
  const lag = await lagBehind(old, next, r.replicaLagMs);
  const t = Date.now();
  const exit = await old.kill();
  await relink(next);
  const promoted = await within(
    'the sentinels to promote the replica',
    async () => (await sentinel.primaryPort()) === next.port,
    60_000,
  );
  const promotedMs = Date.now() - t;
  if (promoted) {
    r.primary = next;
    r.replica = old;
  }
  await sleep(f.pauseMs); // pacing: the old primary stays down a little longer
  await old.restartAsReplicaOf(promoted ? next.port : undefined);
  // Back in the pair: linked to the promoted replica, or, when Sentinel has meanwhile failed over to it
  // again, primary once more with the other linked to it (the pair replicates either way; seen on a
  // loaded machine). The side's roles then follow Sentinel's.
  const rejoined = async () =>
    (await linkedToPrimary(old.port)) ||
    ((await sentinel.primaryPort()) === old.port && (await linkedToPrimary(next.port)));
  const back = promoted && (await within('the old primary to rejoin the pair', rejoined, 60_000));
  const again = back && (await sentinel.primaryPort()) === old.port;
  if (again) {
    r.primary = old;
    r.replica = next;
  }
  // when it did not rejoin: both servers' and the sentinel's view, so the report says why
  const why =
    promoted && !back
      ? ` (${await replicationLine(old.port)}; ${await replicationLine(next.port)}; sentinel says primary :${await sentinel.primaryPort()})${old.tail()}`
      : '';
  return {
    target: `redis :${old.port} -> :${next.port}`,
    outcome:
      `${lag}primary SIGKILLed, ${promoted ? `Sentinel promoted the replica in ${promotedMs} ms` : 'Sentinel did NOT promote the replica'}` +
      `, old primary ${back ? (again ? 'rejoined, and Sentinel made it primary again (the other linked to it)' : 'rejoined as a replica') : `did NOT rejoin${why}`}`,
    facts: { serverKilled: exit?.signal === 'SIGKILL', promoted, serverBack: back },
  };
}

export async function clusterFailover(r: RedisSide, f: Fault): Promise<Injected> {
  const nodes = r.nodes ?? [];
  const healthy = async () =>
    (await clusterOk(nodes)) && (await masterPorts(r)).size === 3 && (await linkedReplicas(r)) === 3;
  if (!(await within('the cluster to be whole (3 masters, 3 linked replicas)', healthy, 60_000, 200)))
    return { outcome: 'skipped: the cluster was not whole', facts: { skipped: 'cluster not whole' } };
  const masters = [...(await masterPorts(r))];
  const [port, id] = masters[f.pick % masters.length] as [number, string];
  const target = nodes.find((n) => n.port === port);
  const replica = (await clusterNodes(port)).find((n) => n.masterId === id);
  if (!target || !replica)
    return { outcome: 'skipped: no replica of the master', facts: { skipped: 'no replica' } };
  const replicaServer = nodes.find((n) => n.port === replica.port);
  const lag = replicaServer ? await lagBehind(target, replicaServer, r.replicaLagMs) : '';
  const t = Date.now();
  const exit = await target.kill();
  if (replicaServer) await relink(replicaServer);
  const promoted = await within(
    'the replica to take over its slots',
    async () =>
      ((await clusterNodes(replica.port)).find((n) => n.id === replica.id)?.flags.includes('master') ??
        false) &&
      (await clusterOk(nodes)),
    60_000,
  );
  const promotedMs = Date.now() - t;
  await sleep(f.pauseMs); // pacing
  await target.start(); // its nodes.conf says it lost the slots: it becomes a replica of the new master
  const back = await within('the killed master to rejoin as a replica', () => linkedToPrimary(port), 60_000);
  return {
    target: `master :${port} -> :${replica.port}`,
    outcome:
      `${lag}master SIGKILLed, ${promoted ? `its replica took over in ${promotedMs} ms` : 'its replica did NOT take over'}` +
      `, ${back ? 'rejoined as a replica' : 'did NOT rejoin'}`,
    facts: { serverKilled: exit?.signal === 'SIGKILL', promoted, serverBack: back },
  };
}
