/** Reads the instance registry (src/runtime/registry.ts): the ids whose heartbeat has not expired. */
import type { Cluster, Redis } from 'ioredis';
import { INSTANCE_INDEX_KEY, instanceKey } from '../keys/instances.js';

export interface InstanceRow {
  id: string;
  kind: string;
  group: string | undefined;
  module: string | undefined;
  mode: string | undefined;
  version: string | undefined;
  host: string | undefined;
  pid: string | undefined;
  started: number | undefined;
  seen: number | undefined;
  metrics: string | undefined;
  partitions: Array<{ topic: string; partition: number; epoch?: number }>;
}

const num = (s: string | undefined) => (s === undefined || !/^\d+$/.test(s) ? undefined : Number(s));

function partitionsOf(raw: string | undefined): InstanceRow['partitions'] {
  if (raw === undefined) return [];
  try {
    const v = JSON.parse(raw) as unknown;
    return Array.isArray(v) ? (v as InstanceRow['partitions']) : [];
  } catch {
    return [];
  }
}

/** The live instances (heartbeat not expired), at most `limit`, by id. */
export async function liveInstances(redis: Redis | Cluster, limit = 500): Promise<InstanceRow[]> {
  const ids = await redis.zrangebyscore(INSTANCE_INDEX_KEY, Date.now(), '+inf', 'LIMIT', 0, limit);
  const rows = await Promise.all(ids.map((id) => redis.hgetall(instanceKey(id))));
  const out: InstanceRow[] = [];
  for (const h of rows) {
    if (h.id === undefined) continue; // expired between the two reads
    out.push({
      id: h.id,
      kind: h.kind ?? '?',
      group: h.group,
      module: h.module,
      mode: h.mode,
      version: h.version,
      host: h.host,
      pid: h.pid,
      started: num(h.started),
      seen: num(h.seen),
      metrics: h.metrics,
      partitions: partitionsOf(h.partitions),
    });
  }
  return out.sort((a, b) => a.id.localeCompare(b.id));
}

/** What the Instances view shows: the live instances, or the last ones read when Redis does not answer. */
export interface InstanceList {
  rows: InstanceRow[];
  /** Set when the registry could not be read now: why, and when `rows` were read (undefined: never). */
  stale: { problem: string; at: number | undefined } | undefined;
}

/**
 * The registry read for the Instances view, bounded by `timeoutMs`: when Redis does not answer (the
 * moment the alert rules matter most) the view still comes, with the instances last read, marked so.
 */
export class RegistryReader {
  #last: { rows: InstanceRow[]; at: number } | undefined;
  constructor(
    readonly redis: Redis | Cluster,
    readonly timeoutMs: number,
  ) {}

  async read(): Promise<InstanceList> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      const rows = await Promise.race([liveInstances(this.redis), late]);
      this.#last = { rows, at: Date.now() };
      return { rows, stale: undefined };
    } catch (err) {
      const problem = `Redis: ${(err as Error)?.message ?? String(err)}`;
      return { rows: this.#last?.rows ?? [], stale: { problem, at: this.#last?.at } };
    } finally {
      clearTimeout(timer);
    }
  }
}
