/**
 * What a runtime does with the default adapter's assignment check (src/kafka/offset-resets.ts): a
 * warning in its log and the `redfence_input_offset_resets_total` / `redfence_input_records_skipped_total`
 * counters. Every runtime on a consumer group (processor, topology, handler, invalidation consumer) gives
 * its adapter this report. The log lines carry offsets and names only, never a record.
 */
import type { OffsetReset, OffsetResetReport } from '../kafka/offset-resets.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import { errorShape, type Logger } from './logger.js';

export function offsetResetReport(
  log: Logger,
  metrics: Pick<RedfenceMetrics, 'inputOffsetReset'> | undefined,
): OffsetResetReport {
  return {
    reset(r: OffsetReset): void {
      const { group, topic, partition, reason, committed, logStart, logEnd, skipped } = r;
      const at = { group, topic, partition, reason, committed, logStart, logEnd };
      if (reason === 'retention')
        log.warn(
          { ...at, skipped },
          'input records deleted before they were processed (retention or DeleteRecords): the committed offset is below the log start, consumption starts at the log start',
        );
      else
        log.warn(
          at,
          'committed offset beyond the end of the input partition (topic deleted and made again, or its log truncated): consumption starts at the log start',
        );
      // a metrics object of an older install may lack the method: the warning is logged all the same
      if (typeof metrics?.inputOffsetReset === 'function')
        metrics.inputOffsetReset(r.topic, r.partition, r.reason, r.skipped);
    },
    failed(topics: readonly string[], err: unknown): void {
      log.warn(
        { ...errorShape(err), topics: [...topics] },
        'committed offsets not compared with the log start on assignment (the check is skipped, consumption goes on)',
      );
    },
  };
}
