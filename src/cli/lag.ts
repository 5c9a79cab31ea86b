/**
 * `redfence lag --group <id>`: the lag status of any consumer group, per partition (src/metrics/lag.ts):
 * `--samples` samples `--interval` ms apart, each partition's window evaluated in Burrow's vocabulary
 * (OK, WARN, STALL, STOP, REWIND, ERR) with the reasons, the rate and the ETA. A table on a terminal,
 * JSON otherwise or with `--json`; `--watch` keeps sampling (a sliding window) until SIGINT/SIGTERM.
 * Exit 0: every partition OK; 1: any is not; 2: a bad option, a missing topic, a refused login.
 */
import { RedfenceError } from '../errors/index.js';
import { commonProperties } from '../kafka/client-config.js';
import type { LagEvaluation, LagSample } from '../metrics/lag.js';
import { BROKERS_OPTION, kafkaClient } from './connection.js';
import { KAFKA_OPTIONS } from './kafka-options.js';
import {
  choiceOption,
  helpText,
  listOption,
  numberOption,
  parseOptions,
  switchOption,
  textOption,
} from './options.js';

export const LAG_OPTIONS = {
  group: textOption('<id>', {
    description: "the consumer group (any group, not only redfence's)",
    env: 'REDFENCE_LAG_GROUP',
  }),
  topic: listOption('<list>', {
    description: 'topics to check (default: every topic the group has committed offsets for)',
    allowed: 'topic[,topic...]',
    item: (s) => (/^[A-Za-z0-9._-]{1,249}$/.test(s) ? s : undefined),
  }),
  brokers: BROKERS_OPTION,
  samples: numberOption('<n>', { description: 'samples in the window', default: 3, min: 1, max: 1000 }),
  interval: numberOption('<ms>', {
    description: 'time between samples',
    default: 1000,
    min: 10,
    max: 3_600_000,
  }),
  end: choiceOption(['last-stable', 'high-watermark'] as const, {
    description: 'the end the lag is counted against (last-stable: what read_committed consumers reach)',
    default: 'last-stable',
  }),
  'slow-lag': numberOption('<n>', {
    description: 'lag above which a partition still consuming is "slow" (WARN)',
    default: 10_000,
    min: 0,
  }),
  'time-lag': switchOption({
    description: 'also fetch the next unprocessed record of each lagging partition for the time lag',
  }),
  json: switchOption({ description: 'print JSON (the default when stdout is not a terminal)' }),
  watch: switchOption({ description: 'keep sampling and printing until SIGINT/SIGTERM' }),
  ...KAFKA_OPTIONS,
};

export const LAG_HELP = helpText(
  'redfence lag --group <id> [--topic t] [options]',
  'Prints the lag status of each partition of a consumer group: OK, WARN, STALL, STOP, REWIND or ERR with\nthe reasons (docs/operations.md, "Lag status"). Exit 0: all OK; 1: any partition not OK; 2: bad input.',
  LAG_OPTIONS,
);

export interface PartitionReport extends LagEvaluation {
  topic: string;
  partition: number;
}

const fmt = (n: number | null, digits = 0) => (n === null ? '-' : n.toFixed(digits));

/** The report as a table (one row a partition). */
export function lagTable(group: string, rows: readonly PartitionReport[]): string {
  const head = [
    'TOPIC',
    'PART',
    'STATUS',
    'COMMITTED',
    'END',
    'LAG',
    'RATE/s',
    'ETA s',
    'TIME LAG s',
    'REASONS',
  ];
  const body = rows.map((r) => [
    r.topic,
    String(r.partition),
    r.status,
    fmt(r.committed),
    fmt(r.end),
    fmt(r.lag),
    fmt(r.rate, 1),
    fmt(r.etaSeconds, 1),
    fmt(r.timeLagSeconds, 1),
    r.reasons.join(','),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] as string).length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [`group ${group}`, line(head), ...body.map(line), ''].join('\n');
}

export async function lag(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: o, sources, help } = parseOptions(LAG_OPTIONS, args);
  if (help) {
    out(LAG_HELP);
    return 0;
  }
  const group = o.group;
  if (group === undefined)
    throw new RedfenceError('RF_INVALID_OPTIONS', '--group <id> is required (redfence lag --help)');
  const client = kafkaClient(o, 'redfence-lag');
  const json = sources.json === undefined ? process.stdout.isTTY !== true : o.json;
  const { LagSampler } = await import('../ops/lag-sampler.js');
  const { evaluateLag, worstStatus } = await import('../metrics/lag.js');
  const properties = commonProperties({ ...client, groupId: group });
  const sampler = new LagSampler({
    properties,
    group,
    ...(o.topic === undefined ? {} : { topics: o.topic }),
    readCommitted: o.end === 'last-stable',
    timeLag: o['time-lag'],
  });
  let stopped = false;
  let wake: () => void = () => undefined;
  const stop = () => {
    stopped = true;
    wake();
  };
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  if (o.watch) {
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  }
  try {
    await sampler.checkTopics();
    const windows = new Map<string, { topic: string; partition: number; window: LagSample[] }>();
    let code = 0;
    for (let taken = 0; !stopped; ) {
      for (const p of await sampler.sample()) {
        const k = `${p.topic}:${p.partition}`;
        const w = windows.get(k) ?? { topic: p.topic, partition: p.partition, window: [] };
        windows.set(k, w);
        w.window.push(p.sample);
        if (w.window.length > o.samples) w.window.shift();
      }
      taken++;
      if (taken >= o.samples) {
        const now = Date.now();
        const rows: PartitionReport[] = [...windows.values()].map((w) => ({
          topic: w.topic,
          partition: w.partition,
          ...evaluateLag(w.window, { slowLag: o['slow-lag'] }, now),
        }));
        const status = worstStatus(rows.map((r) => r.status));
        code = status === 'OK' ? 0 : 1;
        out(
          json
            ? `${JSON.stringify({ group, status, at: new Date(now).toISOString(), partitions: rows })}\n`
            : lagTable(group, rows),
        );
        if (!o.watch) break;
      }
      await pause(o.interval);
    }
    return code;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await sampler.close();
  }
}
