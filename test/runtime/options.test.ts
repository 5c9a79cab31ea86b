/**
 * The options every runtime shares (src/runtime/options.ts) are checked the same way by every runtime:
 * the same bad value of a shared option gives RF_INVALID_OPTIONS naming the option, through the
 * processor's, the handler's, the invalidation consumer's and (for `logger`, the one it takes) the outbox
 * relay's resolver, so a runtime that skips a shared check fails here. Also: the defaults each runtime
 * gives, the unknown-key error (naming the key, listing the known ones), and that each runtime's
 * constructor goes through its resolver. No services: nothing connects.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineInvalidation } from '../../src/definition/invalidation.js';
import { RedfenceError } from '../../src/errors/index.js';
import { resolveHandlerOptions } from '../../src/handler/options.js';
import {
  createHandler,
  createProcessor,
  defineHandler,
  defineProcessor,
  OutboxRelay,
} from '../../src/index.js';
import { resolveInvalidationOptions } from '../../src/invalidation/options.js';
import { createInvalidation } from '../../src/kit/index.js';
import { MAX_TIMER_MS } from '../../src/options/checks.js';
import { resolveRelayOptions } from '../../src/outbox/options.js';
import { resolveOptions } from '../../src/processor/options.js';
import { silentLogger } from '../../src/runtime/logger.js';
import { RUNTIME_FIELDS, type RuntimeField } from '../../src/runtime/options.js';

const kafka = { brokers: ['127.0.0.1:1'] };
/** Stand-ins that pass the client checks; nothing here calls them. */
const redis = { config() {}, pipeline() {}, evalsha() {}, evalshaBuffer() {}, evalBuffer() {} };
const processorDef = defineProcessor({
  input: 'rt-opts-in',
  output: 'rt-opts-out',
  store: 'rtopts',
  operation: () => ({ op: 'add', by: 1 }),
});
const handlerDef = defineHandler({ input: 'rt-opts-in', name: 'rtopts', handle: async () => undefined });
const invalidationDef = defineInvalidation({
  input: { topic: 'rt-opts-in' },
  name: 'rtinval',
  cache: 'quotes',
  keys: 'quotes:{tenantId}:{id}',
});

type Resolve = (extra: Record<string, unknown>) => Record<string, unknown>;
interface Runtime {
  readonly what: string;
  readonly resolve: Resolve;
  /** Through the public constructor. */
  readonly construct: (extra: Record<string, unknown>) => unknown;
  readonly fields: readonly RuntimeField[];
  /** Names of shared options it has as options of its own, with another meaning (the relay's `kafka`). */
  readonly ownNames?: readonly RuntimeField[];
}

const ALL = RUNTIME_FIELDS;
const RUNTIMES: readonly Runtime[] = [
  {
    what: 'processor',
    resolve: (x) => ({ ...resolveOptions({ definition: processorDef, redis, kafka, ...x } as never) }),
    construct: (x) => createProcessor(processorDef, { redis, kafka, ...x } as never),
    fields: ALL.filter((f) => f !== 'closeTimeoutMs'),
  },
  {
    what: 'handler',
    resolve: (x) => ({ ...resolveHandlerOptions(handlerDef, { kafka, ...x } as never) }),
    construct: (x) => createHandler(handlerDef, { kafka, ...x } as never),
    fields: ALL,
  },
  {
    what: 'invalidation consumer',
    resolve: (x) => ({ ...resolveInvalidationOptions(invalidationDef, { kafka, redis, ...x } as never) }),
    construct: (x) => createInvalidation(invalidationDef, { kafka, redis, ...x } as never),
    fields: ALL,
  },
  {
    what: 'outbox relay',
    resolve: (x) => ({
      ...resolveRelayOptions({ databaseUrl: 'postgres://127.0.0.1:1/x', brokers: kafka.brokers, ...x }),
    }),
    construct: (x) =>
      new OutboxRelay({ databaseUrl: 'postgres://127.0.0.1:1/x', brokers: kafka.brokers, ...x } as never),
    fields: ['logger'],
    // its kafka is the security settings beside `brokers`, its metrics a registry (test/outbox/)
    ownNames: ['kafka', 'metrics'],
  },
];

/** Bad values of each shared option, and what the error must say (`what` is the runtime's name). */
const BAD: {
  readonly [F in RuntimeField]: { values: readonly unknown[]; message: (what: string) => RegExp };
} = {
  kafka: {
    values: [undefined, 'localhost:9092', { brokers: [] }, { brokers: ['x:1'], sesionTimeoutMs: 1 }],
    message: (what) =>
      new RegExp(`option "kafka" must be|option "kafka\\.brokers" must|unknown ${what} option "kafka\\.`),
  },
  groupId: { values: ['', 5, {}], message: () => /option "groupId" must be a non-empty string/ },
  instanceId: { values: ['', 7], message: () => /option "instanceId" must be a non-empty string/ },
  logger: {
    values: [{}, 'pino', { debug() {}, info() {}, warn() {} }, null],
    message: () => /option "logger" must be a pino-compatible logger \(method \w+ missing\)/,
  },
  metrics: { values: [{}, 'metrics', null], message: () => /option "metrics" must be a RedfenceMetrics/ },
  health: {
    values: [{}, { markProgress() {} }],
    message: () => /option "health" must be a HealthState \(method \w+ missing\)/,
  },
  onFatal: { values: ['restart', null, {}], message: () => /option "onFatal" must be a function/ },
  tracing: {
    values: ['yes', 1, { tracer: {} }, { tracr: {} }],
    message: (what) =>
      new RegExp(
        `option "tracing" must be|option "tracing\\.tracer" must be an OpenTelemetry Tracer|unknown ${what} option "tracing\\.tracr"`,
      ),
  },
  createTopics: { values: ['yes', 1, null], message: () => /option "createTopics" must be true or false/ },
  closeTimeoutMs: {
    values: [-1, 1.5, '1000', Number.NaN, MAX_TIMER_MS + 1],
    message: () => /option "closeTimeoutMs" must be an integer from 0 to 2147483647/,
  },
};

function refused(f: () => unknown, message: RegExp, label: string): void {
  assert.throws(
    f,
    (e: unknown) => {
      assert.ok(RedfenceError.is(e, 'RF_INVALID_OPTIONS'), `${label}: ${String(e)}`);
      assert.match((e as Error).message, message, label);
      return true;
    },
    label,
  );
}

const known = (message: string) => (message.split('; known: ')[1] ?? '').split(', ');

describe('the shared runtime options', () => {
  it('every runtime resolves its base options (so a refusal below is the option under test)', () => {
    for (const r of RUNTIMES) assert.ok(r.resolve({}), r.what);
  });

  for (const field of RUNTIME_FIELDS) {
    it(`"${field}": the same bad values are refused by every runtime that takes it, naming it`, () => {
      const takers = RUNTIMES.filter((r) => r.fields.includes(field));
      assert.ok(takers.length > 0, `no runtime takes ${field}`);
      for (const r of takers)
        for (const v of BAD[field].values)
          refused(
            () => r.resolve({ [field]: v }),
            BAD[field].message(r.what),
            `${r.what} ${field}=${String(v)}`,
          );
    });
  }

  it('an option a runtime does not take is refused as unknown, naming it and listing the known ones', () => {
    for (const r of RUNTIMES) {
      for (const name of [
        'kafak',
        ...RUNTIME_FIELDS.filter((f) => !r.fields.includes(f) && !r.ownNames?.includes(f)),
      ]) {
        const label = `${r.what} ${name}`;
        refused(
          () => r.resolve({ [name]: 1 }),
          new RegExp(`^unknown ${r.what} option "${name}"; known: `),
          label,
        );
        try {
          r.resolve({ [name]: 1 });
        } catch (e) {
          const list = known((e as Error).message);
          for (const f of r.fields) assert.ok(list.includes(f), `${label}: the known list names ${f}`);
          assert.ok(!list.includes(name), label);
        }
      }
    }
  });

  it('fills in the same defaults as before: group ids, closeTimeoutMs, createTopics, logger', () => {
    const [processor, handler, invalidation, relay] = RUNTIMES.map((r) => r.resolve({}));
    assert.equal(processor?.groupId, 'redfence-rtopts');
    assert.equal(handler?.groupId, 'redfence-handler-rtopts');
    assert.equal(invalidation?.groupId, 'redfence-handler-rtinval');
    assert.equal(processor?.closeTimeoutMs, undefined, 'the processor takes no closeTimeoutMs');
    assert.equal(handler?.closeTimeoutMs, 30_000);
    assert.equal(invalidation?.closeTimeoutMs, 30_000);
    for (const o of [processor, handler, invalidation]) {
      assert.equal(o?.createTopics, false);
      assert.equal(o?.logger, silentLogger);
      assert.equal(o?.instanceId, undefined);
      assert.equal(o?.metrics, undefined);
      assert.equal(o?.tracing, undefined);
      assert.deepEqual(o?.kafka, { settings: kafka });
    }
    assert.equal(relay?.logger, undefined, 'the relay falls back to a silent logger itself');
    // given values come through
    const logger = { debug() {}, info() {}, warn() {}, error() {} };
    for (const r of RUNTIMES) assert.equal(r.resolve({ logger }).logger, logger, r.what);
    for (const r of RUNTIMES.filter((x) => x.fields.includes('closeTimeoutMs')))
      assert.equal(r.resolve({ closeTimeoutMs: 0 }).closeTimeoutMs, 0, `${r.what}: a 0 is a value`);
  });

  it("each runtime's constructor checks its options through its resolver", () => {
    for (const r of RUNTIMES)
      refused(() => r.construct({ logger: {} }), BAD.logger.message(r.what), `new ${r.what}`);
  });
});
