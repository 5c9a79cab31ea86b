/** The Redis set-ups every fence test runs against: strict and cluster fencing on one Redis, cluster fencing on Redis Cluster. */
import type { Cluster, Redis } from 'ioredis';
import type { FencingMode } from '../../src/index.js';
import { cluster, standalone } from './env.js';

export interface Target {
  name: string;
  mode: FencingMode;
  connect(): Redis | Cluster;
}

export const TARGETS: Target[] = [
  { name: 'standalone/strict', mode: 'strict', connect: standalone },
  { name: 'standalone/cluster-fencing', mode: 'cluster', connect: standalone },
  { name: 'cluster/cluster-fencing', mode: 'cluster', connect: cluster },
];
