/** `redfence inspect <store> <key>`: prints a key's stored value, fence and pending entries as JSON. */
import { RedfenceError } from '../errors/index.js';
import { jsonLogger } from './log.js';
import { helpText, parseOptions } from './options.js';
import { connectRedis, REDIS_OPTIONS, redisClient, redisTarget } from './redis.js';

export const INSPECT_OPTIONS = REDIS_OPTIONS;

export const INSPECT_HELP = helpText(
  'redfence inspect <store> <key> [options]',
  "Prints a key's value, fence (partition, offset, epoch) and pending entries as JSON. Exit 0: found;\n3: the key has no state.",
  INSPECT_OPTIONS,
);

function show(b: Buffer | null): string | null {
  if (b === null) return null;
  const t = b.toString('utf8');
  return Buffer.from(t, 'utf8').equals(b) ? t : `base64:${b.toString('base64')}`;
}

export async function inspect(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: o, sources, positionals, help } = parseOptions(INSPECT_OPTIONS, args);
  if (help) {
    out(INSPECT_HELP);
    return 0;
  }
  const [store, key, ...extra] = positionals;
  if (store === undefined || key === undefined || extra.length > 0)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `${extra.length > 0 ? `unexpected arguments ${extra.join(' ')}` : 'missing <store> <key>'}: redfence inspect <store> <key> [options] (redfence inspect --help)`,
    );
  const target = redisTarget(o, sources);
  const { Fence } = await import('../index.js');
  const redis = await redisClient(target, jsonLogger('error', '-'));
  try {
    const fence = new Fence({ redis, store, mode: target.kind === 'cluster' ? 'cluster' : 'strict' });
    await connectRedis(redis, target, o['connect-timeout'], true);
    const state = await fence.read(key);
    const view =
      state === null
        ? null
        : {
            value: show(state.value),
            partition: state.partition,
            offset: state.offset,
            epoch: state.epoch,
            pending: state.pending.map((p) =>
              p.kind === 'output'
                ? { offset: p.offset, output: show(p.output.value) }
                : { offset: p.offset, deadLetter: p.reason },
            ),
          };
    out(`${JSON.stringify({ store, redisKey: fence.keys.state(key), state: view }, null, 2)}\n`);
    return state === null ? 3 : 0;
  } finally {
    redis.disconnect();
  }
}
