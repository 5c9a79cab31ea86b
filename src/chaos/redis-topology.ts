/**
 * The Redis a chaos run starts for itself, in one of three shapes, all on free ports of 127.0.0.1 with
 * their data under the run's temporary directory (AOF, appendfsync always), stopped at the end:
 * - standalone: one redis-server; with failovers also a replica and a TCP proxy the harness switches
 *   after promoting the replica by hand (REPLICAOF NO ONE);
 * - sentinel: a primary, a replica and three Sentinels (quorum 2) that promote the replica themselves;
 *   the instances find the primary through the Sentinels (`--sentinels`, `--sentinel-name`);
 * - cluster: a Redis Cluster of three masters with one replica each (`redis-cli --cluster create`); a
 *   replica takes over its master's slots when the master stops answering (cluster-node-timeout).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pollUntil } from '../harness/poll.js';
import { TcpProxy } from '../harness/proxy.js';
import { RedisServer, type RedisServerOptions, redisBulk } from '../harness/redis-server.js';
import { SentinelServer } from '../harness/sentinel.js';

export type Topology = 'standalone' | 'sentinel' | 'cluster';
export const TOPOLOGIES: readonly Topology[] = ['standalone', 'sentinel', 'cluster'];
export const SENTINEL_NAME = 'rfchaos';
/** How long a cluster master may not answer before its replica takes over. */
export const CLUSTER_NODE_TIMEOUT_MS = 2000;

/** The Redis side of a run: the server the instances use (through the proxy when there is a replica). */
export interface RedisSide {
  topology: Topology;
  /** standalone and sentinel: the primary now (a failover swaps it with `replica`). */
  primary: RedisServer;
  replica?: RedisServer;
  proxy?: TcpProxy;
  sentinels?: SentinelServer[];
  /** cluster: every node (masters and replicas; which is which changes with failovers). */
  nodes?: RedisServer[];
  /**
   * sentinel and cluster failovers: the replication link of the replica to be promoted is cut this long
   * before its primary is killed, so it misses that much of the write stream. 0: it misses only what
   * replication had not sent yet when the SIGKILL came.
   */
  replicaLagMs: number;
}

export async function startRedisSide(
  topology: Topology,
  dir: string,
  failovers: number,
  replicaLagMs = 0,
): Promise<RedisSide> {
  const server = (name: string, extra: Partial<RedisServerOptions> = {}) =>
    new RedisServer({ dir: join(dir, name), persistent: true, ...extra });
  const primary = server(
    topology === 'cluster' ? 'node-0' : 'primary',
    topology === 'cluster' ? { args: CLUSTER_ARGS } : {},
  );
  const side: RedisSide = { topology, primary, replicaLagMs };
  try {
    if (topology === 'cluster') await startCluster(side, server);
    else {
      await primary.start();
      if (topology === 'standalone' && failovers === 0) return side;
      side.replica = server('replica', { replicaOf: primary.port });
      await side.replica.start();
      if (topology === 'standalone') {
        side.proxy = new TcpProxy({ host: '127.0.0.1', port: primary.port });
        await side.proxy.listen();
      } else {
        side.sentinels = [0, 1, 2].map(
          (i) =>
            new SentinelServer({
              name: SENTINEL_NAME,
              primaryPort: primary.port,
              dir: join(dir, `sentinel-${i}`),
            }),
        );
        await Promise.all(side.sentinels.map((s) => s.start()));
        await pollUntil('the sentinels to know the replica', () => sentinelsReady(side), 60_000, 200);
      }
    }
    return side;
  } catch (err) {
    await stopRedisSide(side);
    throw err;
  }
}

const CLUSTER_ARGS = [
  '--cluster-enabled',
  'yes',
  '--cluster-config-file',
  'nodes.conf',
  '--cluster-node-timeout',
  String(CLUSTER_NODE_TIMEOUT_MS),
  // a replica may always take over, however long ago it last heard from its master
  '--cluster-replica-validity-factor',
  '0',
];

async function startCluster(
  side: RedisSide,
  server: (name: string, extra: Partial<RedisServerOptions>) => RedisServer,
): Promise<void> {
  const nodes = [side.primary, ...[1, 2, 3, 4, 5].map((i) => server(`node-${i}`, { args: CLUSTER_ARGS }))];
  side.nodes = nodes;
  await Promise.all(nodes.map((n) => n.start()));
  await promisify(execFile)(
    'redis-cli',
    [
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ],
    { timeout: 60_000 },
  );
  await pollUntil('the cluster to be ok on every node', () => clusterOk(nodes), 60_000, 200);
  await pollUntil(
    'every master to have a linked replica',
    async () => (await masterPorts(side)).size === 3 && (await linkedReplicas(side)) === 3,
    60_000,
    200,
  );
}

export async function stopRedisSide(side: RedisSide): Promise<void> {
  await side.proxy?.close();
  await Promise.all((side.sentinels ?? []).map((s) => s.stop()));
  await Promise.all((side.nodes ?? []).map((n) => n.stop()));
  await side.replica?.stop();
  await side.primary.stop();
}

/** The `redfence run` options that point an instance at this Redis. */
export function instanceRedisArgs(side: RedisSide): string[] {
  if (side.topology === 'cluster')
    return ['--cluster', (side.nodes ?? []).map((n) => `127.0.0.1:${n.port}`).join(',')];
  if (side.topology === 'sentinel')
    return [
      '--sentinels',
      (side.sentinels ?? []).map((s) => `127.0.0.1:${s.port}`).join(','),
      '--sentinel-name',
      SENTINEL_NAME,
    ];
  return ['--redis', side.proxy ? `redis://127.0.0.1:${side.proxy.port}` : side.primary.url];
}

/** Where the verifier reads the state: the primary now, or the cluster's nodes. */
export function verifierRedis(side: RedisSide): { redisUrl: string } | { clusterPorts: number[] } {
  if (side.topology === 'cluster')
    return { clusterPorts: (side.nodes ?? []).filter((n) => n.running).map((n) => n.port) };
  return { redisUrl: side.primary.url };
}

/** What each sentinel says of the primary and the replica, in one line (for a failover that was skipped). */
export async function sentinelsView(side: RedisSide): Promise<string> {
  const views = await Promise.all(
    (side.sentinels ?? []).map(async (s) => {
      const r = (await s.replicas()).find((x) => Number(x.get('port')) === side.replica?.port);
      const replica = r ? `flags ${r.get('flags')} link ${r.get('master-link-status')}` : 'replica unknown';
      return `sentinel :${s.port} primary :${await s.primaryPort()} ${replica}`;
    }),
  );
  return views.join('; ');
}

/** True when every sentinel names `primary` and knows `replica` as a replica that is up and linked. */
export async function sentinelsReady(side: RedisSide): Promise<boolean> {
  const replica = side.replica;
  if (!side.sentinels || !replica) return false;
  for (const s of side.sentinels) {
    if ((await s.primaryPort()) !== side.primary.port) return false;
    const r = (await s.replicas()).find((x) => Number(x.get('port')) === replica.port);
    if (!r) return false;
    const flags = r.get('flags') ?? '';
    if (r.get('master-link-status') !== 'ok' || /s_down|o_down|disconnected/.test(flags)) return false;
  }
  return true;
}

interface ClusterNode {
  id: string;
  port: number;
  flags: string[];
  masterId: string;
  linked: boolean;
}

/** CLUSTER NODES as `port` sees it (empty when it does not answer). */
export async function clusterNodes(port: number): Promise<ClusterNode[]> {
  const text = await redisBulk(port, 'CLUSTER NODES', 2000);
  if (!text) return [];
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const f = l.trim().split(' ');
      return {
        id: f[0] as string,
        port: Number(/:(\d+)@/.exec(f[1] ?? '')?.[1] ?? 0),
        flags: (f[2] ?? '').split(','),
        masterId: f[3] ?? '-',
        linked: f[7] === 'connected',
      };
    });
}

/** True when every running node says cluster_state:ok. */
export async function clusterOk(nodes: readonly RedisServer[]): Promise<boolean> {
  for (const n of nodes) {
    if (!n.running) continue;
    if (!/cluster_state:ok/.test((await redisBulk(n.port, 'CLUSTER INFO')) ?? '')) return false;
  }
  return true;
}

/** The masters that serve slots now (as the first running node sees them), by port -> node id. */
export async function masterPorts(side: RedisSide): Promise<Map<number, string>> {
  const seen = (side.nodes ?? []).find((n) => n.running);
  const out = new Map<number, string>();
  if (!seen) return out;
  for (const n of await clusterNodes(seen.port))
    if (n.flags.includes('master') && !n.flags.includes('fail') && !n.flags.includes('fail?'))
      out.set(n.port, n.id);
  return out;
}

/** How many running replicas are linked to their master (INFO replication, master_link_status:up). */
export async function linkedReplicas(side: RedisSide): Promise<number> {
  let linked = 0;
  for (const n of side.nodes ?? []) {
    if (!n.running) continue;
    const info = (await redisBulk(n.port, 'INFO replication')) ?? '';
    if (/role:slave/.test(info) && /master_link_status:up/.test(info)) linked++;
  }
  return linked;
}
