import { Cluster, Redis } from 'ioredis';
import { Fence } from '../fence/index.js';

function flag(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

function show(b: Buffer | null): string | null {
  if (b === null) return null;
  const t = b.toString('utf8');
  return Buffer.from(t, 'utf8').equals(b) ? t : `base64:${b.toString('base64')}`;
}

/** `redfence inspect <store> <key>`: prints a key's stored value, fence and pending entries as JSON. */
export async function inspect(args: readonly string[], out: (s: string) => void): Promise<number> {
  const positional = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
  const [store, key] = positional;
  if (store === undefined || key === undefined) {
    process.stderr.write(
      'usage: redfence inspect <store> <key> [--redis <url>] [--cluster <host:port,...>]\n',
    );
    return 2;
  }
  const clusterNodes = flag(args, '--cluster') ?? process.env.REDIS_CLUSTER_NODES;
  const redis = clusterNodes
    ? new Cluster(
        clusterNodes.split(',').map((hp) => {
          const [host, port] = hp.split(':');
          return { host: host ?? '127.0.0.1', port: Number(port ?? 6379) };
        }),
      )
    : new Redis(flag(args, '--redis') ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
        lazyConnect: true,
        maxRetriesPerRequest: 1,
      });
  try {
    const fence = new Fence({ redis, store, mode: clusterNodes ? 'cluster' : 'strict' });
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
