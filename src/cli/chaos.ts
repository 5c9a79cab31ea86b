/**
 * `redfence chaos`: runs the fault harness (src/chaos) against real Kafka and a redis-server of its own,
 * prints the report table, and exits 1 when the run fails (src/chaos/verdict.ts; 2 on bad options).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import {
  type ChaosOptions,
  type ChaosReport,
  DEFAULTS,
  formatFaults,
  formatReport,
  formatSummary,
  runChaos,
} from '../chaos/index.js';
import { ALL_POINTS, type CrashPointName } from '../chaos/schedule.js';

export const CHAOS_HELP = `redfence chaos [options]

Runs the package's own customer-totals processor as child processes against real Kafka and a
redis-server the harness starts itself (redis-server must be on the PATH), produces a skewed workload
with poison records while injecting faults, then verifies outputs, state, dead letters and committed
offsets. Exit 0: every fault did what it is meant to and no violation; 1: a violation, a fault that did
not, or an instance exit no fault caused; 2: bad options.

Options (defaults in brackets):
  --mode <m>               exactly-once | at-least-once | both [exactly-once]
  --seed <n>               reproduce a run's workload and fault schedule [random, printed]
  --brokers <list>         Kafka bootstrap servers [KAFKA_BROKERS or 127.0.0.1:19092]
  --records <n>            orders to produce [${DEFAULTS.records}]
  --customers <n>          distinct customers (keys) [${DEFAULTS.customers}]
  --skew <s>               Zipf exponent of customer popularity [${DEFAULTS.skew}]
  --partitions <n>         input and output partitions [${DEFAULTS.partitions}]
  --duration <s>           production window in seconds (rate = records / duration) [${DEFAULTS.durationS}]
  --poison-rate <f>        fraction of poison records (0..1) [${DEFAULTS.poisonRate}]
  --large <n>              valid orders padded to just under 1 MB [${DEFAULTS.large}]
  --kills <n>              random SIGKILLs (each followed by a restart) [${DEFAULTS.kills}]
  --crashes <n>            crash-point faults, cycling through --points [one per point of the mode]
  --points <list>          crash points: ${ALL_POINTS.join(',')}
  --zombies <n>            SIGSTOP an owner past its session timeout, then SIGCONT [${DEFAULTS.zombies}]
  --redis-restarts <n>     SIGKILL the harness's Redis (AOF, appendfsync always) and restart it [${DEFAULTS.redisRestarts}]
  --redis-failovers <n>    kill the Redis primary and promote its replica (no WAIT) [${DEFAULTS.redisFailovers}]
  --scale <list>           instance counts: start, then one scale fault per further count [${DEFAULTS.scale.join(',')}]
  --session-timeout <ms>   the instances' consumer session timeout [${DEFAULTS.sessionTimeoutMs}]
  --crash-timeout <ms>     give up on a crash point not reached after this long [${DEFAULTS.crashTimeoutMs}]
  --drain-timeout <ms>     wait this long for the group to commit the whole input [${DEFAULTS.drainTimeoutMs}]
  --report <file>          also write the report to this file
  --keep                   keep the topics and the Redis directory
  --quiet                  print only the report
  --help                   show this help
`;

class OptionError extends Error {}

type Numeric = Exclude<
  {
    [K in keyof ChaosOptions]: ChaosOptions[K] extends number | undefined ? K : never;
  }[keyof ChaosOptions],
  undefined
>;

const NUMBERS: Record<string, { key: Numeric; integer: boolean; min: number; max?: number }> = {
  seed: { key: 'seed', integer: true, min: 0, max: 2 ** 32 - 1 },
  records: { key: 'records', integer: true, min: 1 },
  customers: { key: 'customers', integer: true, min: 1 },
  skew: { key: 'skew', integer: false, min: 0 },
  partitions: { key: 'partitions', integer: true, min: 2, max: 1000 },
  duration: { key: 'durationS', integer: false, min: 0.1 },
  'poison-rate': { key: 'poisonRate', integer: false, min: 0, max: 1 },
  large: { key: 'large', integer: true, min: 0 },
  kills: { key: 'kills', integer: true, min: 0 },
  crashes: { key: 'crashes', integer: true, min: 0 },
  zombies: { key: 'zombies', integer: true, min: 0 },
  'redis-restarts': { key: 'redisRestarts', integer: true, min: 0 },
  'redis-failovers': { key: 'redisFailovers', integer: true, min: 0 },
  'session-timeout': { key: 'sessionTimeoutMs', integer: true, min: 1000 },
  'crash-timeout': { key: 'crashTimeoutMs', integer: true, min: 1000 },
  'drain-timeout': { key: 'drainTimeoutMs', integer: true, min: 1000 },
};
const STRINGS = new Set(['mode', 'brokers', 'points', 'scale', 'report']);
const FLAGS = new Set(['keep', 'quiet', 'help']);

export interface ParsedChaos {
  modes: Array<ChaosOptions['mode']>;
  options: Partial<ChaosOptions>;
  brokers: string[];
  report?: string;
  quiet: boolean;
  help: boolean;
}

export function parseChaosArgs(args: readonly string[], env = process.env): ParsedChaos {
  const options: Partial<ChaosOptions> = {};
  const parsed: ParsedChaos = {
    modes: ['exactly-once'],
    options,
    brokers: (env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
    quiet: false,
    help: false,
  };
  let crashesGiven = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!a.startsWith('--')) throw new OptionError(`unexpected argument "${a}"`);
    const name = a.slice(2);
    if (FLAGS.has(name)) {
      if (name === 'keep') options.keep = true;
      if (name === 'quiet') parsed.quiet = true;
      if (name === 'help') parsed.help = true;
      continue;
    }
    const num = NUMBERS[name];
    if (!num && !STRINGS.has(name)) throw new OptionError(`unknown option ${a}`);
    const value = args[++i];
    if (value === undefined || value.startsWith('--')) throw new OptionError(`option ${a} needs a value`);
    if (num) {
      const n = Number(value);
      if (
        value.trim() === '' ||
        !Number.isFinite(n) ||
        (num.integer && !Number.isInteger(n)) ||
        n < num.min ||
        (num.max !== undefined && n > num.max)
      )
        throw new OptionError(
          `option ${a} must be ${num.integer ? 'an integer' : 'a number'} >= ${num.min}` +
            `${num.max === undefined ? '' : ` and <= ${num.max}`}, got "${value}"`,
        );
      (options as Record<string, number>)[num.key] = n;
      if (name === 'crashes') crashesGiven = true;
      continue;
    }
    if (name === 'mode') {
      if (value === 'both') parsed.modes = ['exactly-once', 'at-least-once'];
      else if (value === 'exactly-once' || value === 'at-least-once') parsed.modes = [value];
      else throw new OptionError(`option --mode must be exactly-once, at-least-once or both, got "${value}"`);
    } else if (name === 'brokers') {
      parsed.brokers = value.split(',').filter((b) => b !== '');
      if (parsed.brokers.length === 0)
        throw new OptionError('option --brokers needs host:port[,host:port...]');
    } else if (name === 'points') {
      const points = value.split(',');
      for (const p of points)
        if (!(ALL_POINTS as readonly string[]).includes(p))
          throw new OptionError(
            `option --points: unknown crash point "${p}" (known: ${ALL_POINTS.join(', ')})`,
          );
      options.points = points as CrashPointName[];
    } else if (name === 'scale') {
      const counts = value.split(',').map(Number);
      if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > 20))
        throw new OptionError(
          `option --scale must be instance counts from 1 to 20 like 1,3,2, got "${value}"`,
        );
      options.scale = counts;
    } else if (name === 'report') parsed.report = value;
  }
  if (!crashesGiven) delete options.crashes;
  return parsed;
}

/** Where the markdown summary of `--report <file>` goes: the same name with `.md`. */
export function summaryPath(report: string): string {
  return `${report.replace(/\.txt$/, '')}.md`;
}

export async function chaos(args: readonly string[], out: (s: string) => void): Promise<number> {
  let parsed: ParsedChaos;
  try {
    parsed = parseChaosArgs(args);
  } catch (err) {
    if (!(err instanceof OptionError)) throw err;
    process.stderr.write(`redfence chaos: ${err.message}\n\n${CHAOS_HELP}`);
    return 2;
  }
  if (parsed.help) {
    out(CHAOS_HELP);
    return 0;
  }
  const reports: ChaosReport[] = [];
  const texts: string[] = [];
  const summaries: string[] = [];
  for (const mode of parsed.modes) {
    const { pointsFor } = await import('../chaos/schedule.js');
    const crashes = parsed.options.crashes ?? (parsed.options.points ?? pointsFor(mode)).length;
    const report = await runChaos({
      ...parsed.options,
      crashes,
      mode,
      brokers: parsed.brokers,
      ...(parsed.quiet ? {} : { log: (line: string) => out(`${line}\n`) }),
    });
    // the next mode reuses the seed, so `--seed` reproduces both
    parsed.options.seed = report.seed;
    reports.push(report);
    const text = `${formatReport(report)}\nFaults:\n${formatFaults(report)}\n`;
    texts.push(text);
    summaries.push(formatSummary(report, `redfence chaos ${args.join(' ')}`));
    out(`\n${text}\n`);
  }
  if (parsed.report) {
    // the report, and beside it the markdown summary for docs/chaos.md's list of long runs
    await mkdir(dirname(parsed.report), { recursive: true });
    await writeFile(parsed.report, texts.join('\n'));
    await writeFile(summaryPath(parsed.report), `${summaries.join('\n\n')}\n`);
  }
  return reports.every((r) => r.ok) ? 0 : 1;
}
