/**
 * The dead-letter filters of the console's pages and actions, read from a query string or a form:
 * every value checked (a bad one is left out and reported), the same names on both.
 */
import { REASONS as DEAD_LETTER_REASONS } from '../dead-letter/headers.js';
import type { DlqFilter } from '../dead-letter/replay.js';

const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;
const CLASS = /^[A-Za-z_$][\w$.]*$/;
/** The reasons a dead letter can give: the one table (src/dead-letter/headers.ts). */
const REASONS: readonly string[] = [...DEAD_LETTER_REASONS];

export interface DlqSelection {
  topic: string | undefined;
  filter: DlqFilter;
  /** The form values as given (for links and the forms' fields). */
  fields: Record<string, string>;
  problems: string[];
}

const int = (s: string) => (/^\d{1,15}$/.test(s) ? Number(s) : undefined);

/** Reads `topic`, `reason`, `exception`, `source`, `source-partition` from the query or form. */
export function readSelection(q: URLSearchParams, topics: readonly string[]): DlqSelection {
  const fields: Record<string, string> = {};
  const problems: string[] = [];
  const filter: DlqFilter = {};
  const get = (name: string) => {
    const v = (q.get(name) ?? '').trim();
    if (v !== '') fields[name] = v;
    return v;
  };
  const t = get('topic');
  const topic = t !== '' && topics.includes(t) ? t : t === '' ? topics[0] : undefined;
  if (t !== '' && topic === undefined) problems.push("topic: not one of the console's dead-letter topics");
  const reason = get('reason');
  if (reason !== '') {
    if (REASONS.includes(reason)) filter.reasons = [reason];
    else problems.push(`reason: one of ${REASONS.join(', ')}`);
  }
  const exception = get('exception');
  if (exception !== '') {
    if (CLASS.test(exception)) filter.exceptions = [exception];
    else problems.push('exception: a class name');
  }
  const source = get('source');
  if (source !== '') {
    if (TOPIC.test(source)) filter.sourceTopic = source;
    else problems.push('source: a topic name');
  }
  const sp = get('source-partition');
  if (sp !== '') {
    const n = int(sp);
    if (n !== undefined) filter.sourcePartition = n;
    else problems.push('source-partition: a partition number');
  }
  return { topic, filter, fields, problems };
}

export { int as integerField };
