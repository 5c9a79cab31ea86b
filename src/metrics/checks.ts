/**
 * The argument and option checks of RedfenceMetrics (metrics.ts): a metric prefix, constant labels
 * (never one redfence uses itself), counts, partition numbers and names.
 */
import { RedfenceError } from '../errors/index.js';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** Label names redfence itself uses (plus `le`, reserved by histograms). */
const RESERVED_LABELS = new Set([
  'topic',
  'partition',
  'verdict',
  'command',
  'mode',
  'kind',
  'reason',
  'outcome',
  'application_id',
  'topology_node',
  'le',
]);

export type Labels = Record<string, string>;

export function invalidArgument(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', message);
}

export function checkCount(what: string, n: number): void {
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) {
    throw invalidArgument(`${what} must be a finite number >= 0, got ${String(n)}`);
  }
}

export function checkPartitionNumber(partition: number): string {
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0) {
    throw invalidArgument(`partition must be a non-negative integer, got ${String(partition)}`);
  }
  return String(partition);
}

export function checkName(what: string, name: string): string {
  if (typeof name !== 'string' || name === '')
    throw invalidArgument(`${what} must be a non-empty string, got ${JSON.stringify(name)}`);
  return name;
}

export function checkOptions(options: { prefix?: string; labels?: Record<string, string> }): {
  prefix: string;
  labels: Labels;
} {
  if (typeof options !== 'object' || options === null) {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metrics options must be an object');
  }
  const prefix = options.prefix ?? 'redfence_';
  if (typeof prefix !== 'string' || (prefix !== '' && !METRIC_NAME.test(prefix))) {
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `metrics.prefix must be '' or match ${METRIC_NAME.source}, got ${JSON.stringify(prefix)}`,
    );
  }
  const labels: Labels = {};
  const given = options.labels ?? {};
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metrics.labels must be an object of strings');
  }
  for (const [name, value] of Object.entries(given)) {
    if (!LABEL_NAME.test(name) || name.startsWith('__') || RESERVED_LABELS.has(name)) {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `metrics.labels: ${JSON.stringify(name)} is not a usable label name (must match ` +
          `${LABEL_NAME.source}, not start with '__', and not be one of ${[...RESERVED_LABELS].join(', ')})`,
      );
    }
    if (typeof value !== 'string') {
      throw new RedfenceError('RF_INVALID_OPTIONS', `metrics.labels.${name} must be a string`);
    }
    labels[name] = value;
  }
  return { prefix, labels };
}
