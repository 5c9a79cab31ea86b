/**
 * The console on a processor's or handler's own metrics server (`redfence run --console`), read-only,
 * under a path prefix: the same pages and security rules as `redfence console` (CSP, Host check,
 * masked values), every action refused (403), and the metrics server's binding (127.0.0.1 unless its
 * host says otherwise). The lag sampling starts once the metrics server listens; closing the metrics
 * server closes the console's Kafka clients.
 *
 * ```ts
 * const mount = consoleMount({ redis, kafka: { brokers: ['127.0.0.1:9092'], clientId: 'totals-console' },
 *   groups: ['redfence-totals'] });
 * await startMetricsServer({ metrics, health, port: 9464, mount }); // http://127.0.0.1:9464/console/
 * ```
 */
import type { MetricsMount } from '../metrics/server.js';
import { allowedHosts } from './security.js';
import { type ConsoleSources, consoleCore } from './server.js';

export interface ConsoleMountOptions extends ConsoleSources {
  /** Default `/console`. */
  prefix?: string;
}

export function consoleMount(o: ConsoleMountOptions): MetricsMount {
  const prefix = o.prefix ?? '/console';
  const core = consoleCore(o, { base: prefix, tls: false, token: undefined });
  return {
    prefix,
    listening: (host, port) => core.listening(allowedHosts(host, port)),
    handle: core.listener,
    close: () => core.close(),
  };
}
