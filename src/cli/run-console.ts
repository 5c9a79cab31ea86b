/**
 * `redfence run --console`: the console (src/console/mount.ts), read-only, on the processor's or
 * handler's own metrics server under `/console`: the registered instances, the lag of its group (and
 * of every registered group), the inspector on its Redis, its dead-letter topic. It reads over the
 * runtime's own Redis client and opens its own Kafka clients (lag sampling, dead-letter pages) once the
 * metrics server listens; they close with the metrics server.
 */
import { isIP } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { checkPrometheusUrl } from '../console/prometheus.js';
import { RedfenceError } from '../errors/index.js';
import type { MetricsMount } from '../metrics/server.js';
import { kafkaClient } from './connection.js';
import type { KafkaValues } from './kafka-options.js';

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/**
 * Refuses --console without what it needs, --console-prometheus without --console or that is no
 * http(s) URL, and a --metrics-host that is no address (before any connection).
 */
export function checkMetricsFlags(o: {
  console: boolean;
  'console-prometheus'?: string | undefined;
  'metrics-port': number | undefined;
  'metrics-host': string;
}): void {
  if (o.console && o['metrics-port'] === undefined)
    throw invalid('--console is served on the metrics server; add --metrics-port <n>');
  const prometheus = o['console-prometheus'];
  if (prometheus !== undefined) {
    if (!o.console) throw invalid('--console-prometheus applies to --console; add --console');
    checkPrometheusUrl('--console-prometheus', prometheus);
  }
  const host = o['metrics-host'];
  if (host !== 'localhost' && isIP(host) === 0)
    throw invalid(`--metrics-host must be an IP address or localhost, got "${host}"`);
}

export async function runConsoleMount(
  o: KafkaValues & { brokers: string[] },
  x: {
    redis: Redis | Cluster;
    cluster: boolean;
    instance: string;
    group: string | undefined;
    dlqTopic: string | undefined;
    /** --console-prometheus */
    prometheus: string | undefined;
  },
): Promise<MetricsMount> {
  const { consoleMount } = await import('../console/mount.js');
  return consoleMount({
    redis: x.redis,
    fenceMode: x.cluster ? 'cluster' : 'strict',
    kafka: kafkaClient(o, `redfence-console-${x.instance}`),
    groups: x.group === undefined ? [] : [x.group],
    dlqTopics: x.dlqTopic === undefined ? [] : [x.dlqTopic],
    ...(x.prometheus === undefined ? {} : { prometheus: x.prometheus }),
  });
}
