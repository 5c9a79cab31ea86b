/**
 * `redfence reconcile --repair`: each drifted key is rewritten to what the committed progress implies:
 * the fold up to the key's last record under its partition's committed offset, fenced at that record,
 * under the partition's current epoch, without pending entries. A key whose fence is at one of its
 * records past the committed offset is left unless told the processor is stopped (planRepairs). A key with no record under the committed offset
 * and a key no record produced are deleted. Each write is one script (lua/repairKey-1.lua) that writes
 * only if the key is still exactly as reconcile read it, so a running processor is never overwritten.
 * Not repaired: keys that cannot be judged, hashes that cannot be decoded, keys of partitions not read.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { FenceRedis } from '../fence/redis-port.js';
import { loadScripts } from '../fence/script-loader.js';
import { runScript } from '../fence/script-runner.js';
import type { PartitionRange, Reconciliation, StoredKey } from './reconcile.js';
import type { ExpectedFold } from './reconcile-fold.js';

export interface RepairPlan {
  readonly redisKey: string;
  /** What was read: null (no state) or the fence and the value's SHA-1. */
  readonly read: { readonly fence: string; readonly valueSha: string } | null;
  /** null: delete the key. */
  readonly target: {
    readonly partition: number;
    readonly offset: number;
    readonly epoch: number;
    readonly value: string | null;
  } | null;
}

export interface RepairResult {
  readonly repaired: string[];
  /** Keys written by someone else since they were read: left as they are. */
  readonly changed: string[];
  readonly skipped: Array<{ key: string; reason: string }>;
}

const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

/**
 * The repairs of the keys with anomalies. A key whose fence is at one of its own records at or past
 * its partition's committed offset was written by an owner that has not committed it yet (a running
 * processor, or one that died): rewinding it to the committed fold would undo those records, which a
 * running owner never receives again. It is skipped unless `uncommitted` (the processor is stopped:
 * its next owner consumes from the committed offset and applies them again).
 */
export function planRepairs(
  fold: ExpectedFold,
  ranges: ReadonlyMap<number, PartitionRange>,
  stored: readonly StoredKey[],
  partitionEpochs: ReadonlyMap<number, number>,
  result: Reconciliation,
  options: { readonly uncommitted?: boolean } = {},
): { plans: RepairPlan[]; skipped: RepairResult['skipped'] } {
  const byKey = new Map(stored.map((s) => [s.redisKey, s]));
  const ids = new Map<string, string>();
  for (const id of fold.keys.keys()) ids.set(fold.keySpace.state(keyOfId(fold, id)), id);
  const plans: RepairPlan[] = [];
  const skipped: RepairResult['skipped'] = [];
  for (const redisKey of new Set(result.anomalies.map((a) => a.key))) {
    const s = byKey.get(redisKey);
    if (s !== undefined && 'corrupt' in s.state) {
      skipped.push({ key: redisKey, reason: 'the state hash cannot be decoded' });
      continue;
    }
    const st = s === undefined || 'corrupt' in s.state ? null : s.state;
    const read =
      st === null
        ? null
        : {
            fence: `${st.partition}:${st.offset}:${st.epoch}`,
            valueSha: st.value === null ? '-' : sha1(st.value),
          };
    const h = fold.keys.get(s?.id ?? ids.get(redisKey) ?? '');
    if (h === undefined) {
      plans.push({ redisKey, read, target: null }); // unexpected key
      continue;
    }
    const range = ranges.get(h.partition);
    if (range === undefined || range.start > 0) {
      skipped.push({ key: redisKey, reason: `partition ${h.partition} was not read from offset 0` });
      continue;
    }
    if (
      options.uncommitted !== true &&
      st !== null &&
      st.partition === h.partition &&
      st.offset >= range.committed &&
      h.steps.some((x) => x.offset === st.offset)
    ) {
      skipped.push({
        key: redisKey,
        reason: `its fence is at offset ${st.offset}, a record of the key at or past the committed offset ${range.committed}: written by an owner that has not committed it (repair it once committed, or with --repair-uncommitted while the processor is stopped)`,
      });
      continue;
    }
    let i = h.steps.length - 1;
    while (i >= 0 && (h.steps[i]?.offset ?? 0) >= range.committed) i--;
    const step = h.steps[i];
    plans.push({
      redisKey,
      read,
      target:
        step === undefined
          ? null
          : {
              partition: h.partition,
              offset: step.offset,
              epoch: partitionEpochs.get(h.partition) ?? 0,
              value: step.value,
            },
    });
  }
  return { plans, skipped };
}

/** The user key of a key id as the fold saw it (ids of raw keys are the keys themselves). */
function keyOfId(fold: ExpectedFold, id: string): string {
  return fold.keys.get(id)?.steps[0]?.meta.key ?? id;
}

export async function applyRepairs(
  redis: FenceRedis,
  plans: readonly RepairPlan[],
): Promise<Omit<RepairResult, 'skipped'>> {
  const script = loadScripts(fileURLToPath(new URL('./lua/', import.meta.url))).get('repairKey');
  if (script === undefined) throw new Error('repairKey-1.lua is missing');
  const repaired: string[] = [];
  const changed: string[] = [];
  for (const p of plans) {
    const t = p.target;
    const args =
      t === null
        ? ['del']
        : [
            'set',
            String(t.partition),
            String(t.offset),
            String(t.epoch),
            ...(t.value === null ? ['0'] : ['1', t.value]),
          ];
    const r = await runScript(
      redis,
      script,
      [p.redisKey],
      [p.read?.fence ?? '-', p.read?.valueSha ?? '-', ...args],
    );
    (Number(r) === 1 ? repaired : changed).push(p.redisKey);
  }
  return { repaired, changed };
}
