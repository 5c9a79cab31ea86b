/**
 * The `redfence` command line. Subcommands arrive with the processor (run, inspect, lag, reconcile,
 * chaos, dlq replay); today it answers --help and --version and reads a key's fence (inspect).
 */
import { VERSION } from '../version.js';

const HELP = `redfence ${VERSION}: effectively-once Kafka stream processing with state in Redis

Usage:
  redfence --help              show this help
  redfence --version           print the version
  redfence run <module> [options]
                               run the processor a module exports (redfence run --help for options)
  redfence inspect <store> <key> [--redis <url>] [--cluster <host:port,...>]
                               print a key's value, fence (partition, offset, epoch) and pending entries
  redfence chaos [options]     run the fault harness against real Kafka and its own Redis, verify the
                               results (redfence chaos --help for options)

Environment:
  REDIS_URL                    default Redis for inspect (redis://127.0.0.1:6379)
  REDIS_CLUSTER_NODES          use Redis Cluster seeds instead (host:port,host:port,...)
`;

export async function main(
  argv: readonly string[],
  out: (s: string) => void = (s) => process.stdout.write(s),
): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    out(HELP);
    return cmd === undefined ? 1 : 0;
  }
  if (cmd === '--version' || cmd === '-v') {
    out(`${VERSION}\n`);
    return 0;
  }
  if (cmd === 'run') {
    const { run } = await import('./run.js');
    return run(rest, out);
  }
  if (cmd === 'inspect') {
    const { inspect } = await import('./inspect.js');
    return inspect(rest, out);
  }
  if (cmd === 'chaos') {
    const { chaos } = await import('./chaos.js');
    return chaos(rest, out);
  }
  process.stderr.write(`redfence: unknown command "${cmd}"\n\n${HELP}`);
  return 2;
}
