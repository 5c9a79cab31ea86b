/**
 * The chaos verifier. It shares no code with the processing path (nothing from src/processor, src/fence,
 * src/definition, src/keys, src/partitioner, src/kafka): its own murmur2, its own reading of Kafka and of the
 * Redis hashes, its own model of the customer-totals processor (src/chaos/customer-totals.ts): a
 * customer's state after n valid orders is `{"total":<sum of their amounts>,"count":n}`, in offset order
 * on the key's partition; an order with `"refuse":true` is refused by its reducer: a `processing-error`
 * dead letter that changes no state and moves the fence past it.
 *
 * Checks:
 * - input: classified record by record (null key; key not on its murmur2 partition; value not JSON or
 *   amount not an integer; refused; else valid) and, when given, matched against what the workload
 *   produced;
 * - outputs (read_committed in exactly-once mode, read_uncommitted in at-least-once): each is exactly the
 *   bytes `{"total":T,"count":C}` of its customer after its first C valid orders; every valid order has
 *   one (its count C), exactly one in exactly-once mode;
 * - state in Redis: each customer's hash `rf:{<store>:<customer>}` holds the fold of all its valid
 *   orders applied once (`v`, none when all were refused), its fence at its last valid or refused order
 *   (`p`, `o`), a writer epoch `e` no higher than its partition's epoch, no pending entry past the fence;
 *   no state for anyone else;
 * - dead letters (`<input>.DLT`): each poison record has one (exactly one in exactly-once mode) with the
 *   right `redfence-reason` (a refused order: `processing-error`), its original topic/partition/offset
 *   headers and its key and value bytes;
 *   no valid record is dead-lettered (no record both dead-lettered and applied);
 * - offsets: the group's committed offsets equal the input's end offsets;
 * - verdicts (when scraped): no REBASE, and no more APPLY than valid records.
 *
 * This file runs the checks in that order on one ledger of the input and one tally of violations
 * (src/chaos/verify-ledger.ts, which also reads the input); the checks on Kafka are
 * src/chaos/verify-rules.ts, the check of the state src/chaos/verify-state.ts.
 */
import { readInput, Tally, type VerifyOptions, type VerifyResult } from './verify-ledger.js';
import { checkDeadLetters, checkOffsets, checkOutputs, checkVerdicts } from './verify-rules.js';
import { checkState } from './verify-state.js';

export {
  type ChaosMode,
  KINDS,
  type VerifyOptions,
  type VerifyResult,
  type Violation,
  type ViolationKind,
} from './verify-ledger.js';

export async function verify(o: VerifyOptions): Promise<VerifyResult> {
  const tally = new Tally();
  const { violate } = tally;
  const ledger = await readInput(o, violate);
  const outputs = await checkOutputs(o, ledger, violate);
  const deadLetters = await checkDeadLetters(o, ledger, violate);
  const state = await checkState(o, ledger, violate);
  const offsets = await checkOffsets(o, ledger, violate);
  if (o.verdicts) checkVerdicts(o.verdicts, ledger.validRecords, violate);
  return {
    inputRecords: ledger.inputRecords,
    validRecords: ledger.validRecords,
    poisonRecords: ledger.poison.size,
    poisonByReason: ledger.poisonByReason,
    customers: ledger.customers.size,
    ...outputs,
    ...deadLetters,
    stateKeys: state.stateKeys,
    pendingEntriesLeft: state.pendingEntriesLeft,
    ...offsets,
    violations: tally.violations,
    violationCounts: tally.violationCounts,
    kinds: tally.kinds,
    extraApplies: state.extraApplies,
    missingApplies: state.missingApplies,
  };
}
