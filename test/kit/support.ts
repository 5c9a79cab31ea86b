/** Shared by the kit's tests: the two Redis set-ups every component runs on, and its child processes. */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { Child, type LogLine } from '../../src/harness/index.js';
import { cluster, REDIS_CLUSTER_NODES, REDIS_URL, standalone } from '../helpers/env.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface KitTarget {
  name: 'standalone' | 'cluster';
  connect(): Redis | Cluster;
}

export const KIT_TARGETS: KitTarget[] = [
  { name: 'standalone', connect: standalone },
  { name: 'cluster', connect: cluster },
];

/** What a child fixture needs to connect like the test: `standalone` or `cluster`. */
export function targetEnv(target: KitTarget): Record<string, string> {
  return {
    KIT_TARGET: target.name,
    REDIS_URL,
    REDIS_CLUSTER_NODES: REDIS_CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(','),
  };
}

/** Starts `test/kit/fixtures/<fixture>.ts` under tsx and waits for its `ready` log line. */
export async function startFixture(
  name: string,
  fixture: string,
  env: Record<string, string>,
): Promise<Child> {
  const child = new Child({
    name,
    command: process.execPath,
    args: ['--import', 'tsx', `test/kit/fixtures/${fixture}.ts`],
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  try {
    await child.ready({ label: 'ready', log: (l) => l.msg === 'ready', timeoutMs: 30_000 });
  } catch (err) {
    await child.kill();
    throw err;
  }
  return child;
}

/** The child's `result` line. */
export async function resultOf(child: Child, timeoutMs = 60_000): Promise<LogLine> {
  return child.log.waitFor('result', (l) => l.msg === 'result', timeoutMs);
}
