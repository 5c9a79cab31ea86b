/**
 * A reducer's throw as the fence keeps it: a pending dead letter (output mode 4, src/fence/types.ts'
 * OutputSpec `{ deadLetter }`) whose text is read back when a replay re-emits it. The text holds the
 * dead letter's reason, the thrown class's name and its message, so the replayed dead letter has the
 * headers the first one had (kafka_dlt-exception-fqcn and -message; the stack trace is the replay's).
 * A fence REJECT's own text (an operation that cannot apply) has no such prefix: a `rejected` dead letter.
 */
import type { DeadLetterReason } from '../dead-letter/build.js';
import { fqcnOf, textOf } from '../dead-letter/thrown.js';

const PREFIX = 'processing-error\n';

/** The text the fence keeps for a record whose reducer threw `error`. */
export function storedDeadLetter(error: unknown): string {
  const name = fqcnOf(error).replace(/^redfence\./, '');
  return `${PREFIX}${name}\n${textOf(error)}`;
}

/** A re-emitted dead letter's reason and error, from the text the fence kept. */
export function fromStoredDeadLetter(text: string): { reason: DeadLetterReason; error: Error } {
  if (!text.startsWith(PREFIX)) return { reason: 'rejected', error: new Error(text) };
  const rest = text.slice(PREFIX.length);
  const nl = rest.indexOf('\n');
  const error = new Error(nl < 0 ? rest : rest.slice(nl + 1));
  if (nl > 0) error.name = rest.slice(0, nl);
  return { reason: 'processing-error', error };
}
