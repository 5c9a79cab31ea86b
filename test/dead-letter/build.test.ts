import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  buildDeadLetter,
  DEAD_LETTER_HEADERS,
  type DeadLetterInput,
  type DeadLetterReason,
  type HeaderValue,
  type SourceRecord,
} from '../../src/dead-letter/build.js';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { withoutHostPaths } from '../../src/dead-letter/thrown.js';
import { RedfenceError } from '../../src/errors/index.js';

const REASONS: DeadLetterReason[] = [
  'wrong-partition',
  'undecodable',
  'rejected',
  'processing-error',
  'oversized',
  'null-key',
  'late',
];

function source(overrides: Partial<SourceRecord> = {}): SourceRecord {
  return {
    topic: 'orders',
    partition: 3,
    offset: 2n ** 40n + 5n,
    timestamp: 1_700_000_000_123,
    key: Buffer.from('customer-42'),
    value: Buffer.from('{"amount":"x"}'),
    headers: { trace: 'abc' },
    ...overrides,
  };
}

function input(overrides: Partial<DeadLetterInput> = {}): DeadLetterInput {
  return { source: source(), consumerGroup: 'billing', reason: 'processing-error', ...overrides };
}

function header(headers: Record<string, Buffer | Buffer[]>, name: string): Buffer {
  const value = headers[name];
  assert.ok(Buffer.isBuffer(value), `${name} should be a single Buffer`);
  return value;
}

function text(headers: Record<string, Buffer | Buffer[]>, name: string): string {
  return header(headers, name).toString('utf8');
}

const H = DEAD_LETTER_HEADERS;

describe('buildDeadLetter: Spring byte encodings', () => {
  it('writes each header with the exact bytes Spring writes', () => {
    const dlq = buildDeadLetter(input({ error: new TypeError('amount is not a number') }));
    const h = dlq.headers;
    assert.deepEqual(header(h, 'kafka_dlt-original-topic'), Buffer.from('orders'));
    assert.deepEqual(header(h, 'kafka_dlt-original-partition'), Buffer.from([0, 0, 0, 3]));
    assert.deepEqual(header(h, 'kafka_dlt-original-offset'), Buffer.from([0, 0, 1, 0, 0, 0, 0, 5]));
    // 1_700_000_000_123 = 0x18B_CFE5_687B
    assert.deepEqual(
      header(h, 'kafka_dlt-original-timestamp'),
      Buffer.from([0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x7b]),
    );
    assert.equal(text(h, 'kafka_dlt-original-timestamp-type'), 'CreateTime');
    assert.equal(text(h, 'kafka_dlt-original-consumer-group'), 'billing');
    assert.equal(text(h, 'kafka_dlt-exception-fqcn'), 'redfence.TypeError');
    assert.equal(text(h, 'kafka_dlt-exception-message'), 'amount is not a number');
    assert.match(text(h, 'kafka_dlt-exception-stacktrace'), /^TypeError: amount is not a number\n\s+at /);
    assert.equal(text(h, 'redfence-reason'), 'processing-error');
    assert.equal(h['kafka_dlt-exception-cause-fqcn'], undefined, 'no cause, no cause header');
  });

  it('encodes LOG_APPEND_TIME, -1 timestamps and the largest offset', () => {
    const dlq = buildDeadLetter(
      input({
        source: source({ timestampType: 'LOG_APPEND_TIME', timestamp: -1, offset: '9223372036854775807' }),
      }),
    );
    assert.equal(text(dlq.headers, H.originalTimestampType), 'LogAppendTime');
    assert.deepEqual(header(dlq.headers, H.originalTimestamp), Buffer.alloc(8, 0xff));
    assert.deepEqual(
      header(dlq.headers, H.originalOffset),
      Buffer.from([0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
    );
  });

  it('accepts offsets and timestamps as strings, numbers or bigints alike', () => {
    const forms = [
      { offset: 1042, timestamp: 1_700_000_000_000 },
      { offset: '1042', timestamp: '1700000000000' },
      { offset: 1042n, timestamp: 1_700_000_000_000 },
    ];
    const encoded = forms.map((f) => buildDeadLetter(input({ source: source(f) })).headers);
    for (const h of encoded.slice(1)) {
      assert.deepEqual(h[H.originalOffset], encoded[0]?.[H.originalOffset]);
      assert.deepEqual(h[H.originalTimestamp], encoded[0]?.[H.originalTimestamp]);
    }
  });

  it('keeps key and value, and leaves the partition to the partitioner', () => {
    const s = source({ key: null });
    const dlq = buildDeadLetter(input({ source: s }));
    assert.equal(dlq.key, null);
    assert.equal(dlq.value, s.value);
    assert.ok(!('partition' in dlq), 'partition must not be set');
  });
});

describe('buildDeadLetter: original headers', () => {
  it('keeps every original header, multi-valued ones in order, strings as UTF-8', () => {
    const bin = Buffer.from([0, 0xff, 0x10]);
    const headers: Record<string, HeaderValue> = {
      trace: 'abc',
      binary: bin,
      multi: ['first', Buffer.from('second'), 'drittes€'],
      gone: undefined,
    };
    Object.defineProperty(headers, '__proto__', { value: 'weird', enumerable: true });
    const dlq = buildDeadLetter(input({ source: source({ headers }) }));
    assert.deepEqual(dlq.headers.trace, Buffer.from('abc'));
    assert.deepEqual(dlq.headers.binary, bin);
    assert.deepEqual(dlq.headers.multi, [
      Buffer.from('first'),
      Buffer.from('second'),
      Buffer.from('drittes€'),
    ]);
    assert.ok(!Object.hasOwn(dlq.headers, 'gone'), 'undefined header values are dropped');
    assert.ok(Object.hasOwn(dlq.headers, '__proto__'), 'a header named __proto__ stays a header');
    assert.deepEqual(Object.getOwnPropertyDescriptor(dlq.headers, '__proto__')?.value, Buffer.from('weird'));
    assert.equal(Object.getPrototypeOf(dlq.headers), Object.prototype);
  });

  it('does not modify anything passed in', () => {
    const key = Buffer.from('k');
    const value = Buffer.from('v');
    const multi = [Buffer.from('a'), 'b'];
    const prior = Buffer.from('old-topic');
    const headers = Object.freeze({
      multi: Object.freeze(multi),
      [H.originalTopic]: prior,
      [H.exceptionFqcn]: 'redfence.Old',
    });
    const s = Object.freeze(source({ key, value, headers }));
    const inp = Object.freeze(input({ source: s, error: new Error('x') }));
    const snapshot = (v: unknown): string =>
      JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));
    const before = snapshot(inp);
    const dlq = buildDeadLetter(inp, Object.freeze({ maxStackTraceBytes: 100 }));
    assert.equal(snapshot(inp), before);
    assert.notEqual(dlq.headers, headers);
    assert.notEqual(dlq.headers.multi, multi);
    assert.deepEqual(prior, Buffer.from('old-topic'));
  });

  it('re-dead-lettering appends original-* headers and replaces the exception headers, like Spring', () => {
    const first = buildDeadLetter(
      input({
        source: source({ topic: 'orders', partition: 1, offset: 10 }),
        reason: 'undecodable',
        error: new Error('outer', { cause: new RangeError('inner') }),
      }),
    );
    const second = buildDeadLetter({
      source: source({ topic: 'orders.DLT', partition: 0, offset: 77, headers: first.headers }),
      consumerGroup: 'replayer',
      reason: 'rejected',
    });
    const topics = second.headers[H.originalTopic];
    assert.ok(Array.isArray(topics));
    assert.deepEqual(topics, [Buffer.from('orders'), Buffer.from('orders.DLT')]);
    assert.ok(Array.isArray(second.headers[H.originalPartition]));
    assert.ok(Buffer.isBuffer(second.headers[H.exceptionFqcn]), 'exception headers are replaced');
    assert.equal(second.headers[H.exceptionCauseFqcn], undefined, 'a stale cause header is removed');
    const read = readDeadLetterHeaders(second.headers);
    assert.equal(read.originalTopic, 'orders.DLT');
    assert.equal(read.originalOffset, 77n);
    assert.equal(read.consumerGroup, 'replayer');
    assert.equal(read.reason, 'rejected');
    assert.equal(read.exceptionFqcn, 'redfence.Rejected');
    // The first hop is still there for whoever wants it.
    assert.deepEqual(
      readDeadLetterHeaders({ ...second.headers, [H.originalTopic]: topics[0] }).originalTopic,
      'orders',
    );
  });
});

describe('buildDeadLetter: exception class names and messages', () => {
  const fqcn = (error: unknown, reason: DeadLetterReason = 'processing-error'): string =>
    text(buildDeadLetter(input({ error, reason })).headers, H.exceptionFqcn);

  it('names a JS Error redfence.<ErrorName>', () => {
    assert.equal(fqcn(new TypeError('t')), 'redfence.TypeError');
    assert.equal(fqcn(new Error('e')), 'redfence.Error');
    assert.equal(fqcn(new RedfenceError('RF_BAD_REPLY', 'r')), 'redfence.RedfenceError');
    class ValidationError extends Error {}
    assert.equal(fqcn(new ValidationError('v')), 'redfence.ValidationError');
    const odd = new Error('o');
    odd.name = 'my.odd name';
    assert.equal(fqcn(odd), 'redfence.my_odd_name');
  });

  it('names anything else thrown redfence.NonErrorThrown', () => {
    const dlq = buildDeadLetter(input({ error: 'plain string' }));
    assert.equal(text(dlq.headers, H.exceptionFqcn), 'redfence.NonErrorThrown');
    assert.equal(text(dlq.headers, H.exceptionMessage), 'plain string');
    assert.equal(text(dlq.headers, H.exceptionStacktrace), 'redfence.NonErrorThrown: plain string');
    const obj = buildDeadLetter(input({ error: { code: 7 } }));
    assert.equal(text(obj.headers, H.exceptionMessage), '{"code":7}');
    assert.equal(fqcn(null), 'redfence.NonErrorThrown');
    assert.equal(fqcn(42), 'redfence.NonErrorThrown');
  });

  it('names a failure without an error after its reason', () => {
    const expected: Record<DeadLetterReason, string> = {
      'wrong-partition': 'redfence.WrongPartition',
      undecodable: 'redfence.Undecodable',
      rejected: 'redfence.Rejected',
      'processing-error': 'redfence.ProcessingError',
      oversized: 'redfence.Oversized',
      'null-key': 'redfence.NullKey',
      late: 'redfence.Late',
    };
    for (const reason of REASONS) {
      const h = buildDeadLetter(input({ reason })).headers;
      assert.equal(text(h, H.exceptionFqcn), expected[reason]);
      assert.ok(text(h, H.exceptionMessage).length > 0);
      assert.ok(text(h, H.exceptionStacktrace).startsWith(`${expected[reason]}: `));
      assert.equal(text(h, H.reason), reason);
    }
  });

  it("writes the cause's class, joins the messages as Spring does, and prints the cause chain", () => {
    const inner = new RangeError('inner');
    const h = buildDeadLetter(input({ error: new Error('outer', { cause: inner }) })).headers;
    assert.equal(text(h, H.exceptionCauseFqcn), 'redfence.RangeError');
    assert.equal(text(h, H.exceptionMessage), 'outer; inner');
    const stack = text(h, H.exceptionStacktrace);
    assert.match(stack, /^Error: outer\n/);
    assert.match(stack, /\nCaused by: RangeError: inner\n/);
    const stringCause = buildDeadLetter(input({ error: new Error('outer', { cause: 'why' }) })).headers;
    assert.equal(text(stringCause, H.exceptionCauseFqcn), 'redfence.NonErrorThrown');
  });

  it('never throws on hostile errors: cyclic causes, throwing getters, unprintable values', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    Object.defineProperty(a, 'cause', { value: b });
    assert.match(text(buildDeadLetter(input({ error: a })).headers, H.exceptionMessage), /^a; b$/);
    const hostile = new Error('h');
    for (const p of ['stack', 'name', 'message', 'cause']) {
      Object.defineProperty(hostile, p, {
        get() {
          throw new Error('boom');
        },
      });
    }
    assert.equal(fqcn(hostile), 'redfence.Error');
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    assert.equal(
      text(buildDeadLetter(input({ error: circular })).headers, H.exceptionMessage),
      '[object Object]',
    );
    assert.equal(
      text(buildDeadLetter(input({ error: Object.create(null) })).headers, H.exceptionMessage),
      '{}',
    );
    const unprintable = { toJSON: () => undefined, toString: () => Symbol('x') };
    assert.match(
      text(buildDeadLetter(input({ error: unprintable })).headers, H.exceptionMessage),
      /unprintable/,
    );
  });
});

describe('buildDeadLetter: truncation', () => {
  const isCleanUtf8 = (b: Buffer): boolean => Buffer.from(b.toString('utf8'), 'utf8').equals(b);

  it('cuts stack traces to maxStackTraceBytes without splitting a character', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 200 }),
        fc.integer({ min: 0, max: 300 }),
        (stack, max) => {
          const error = new Error('m');
          error.stack = stack === '' ? 'x' : stack;
          // the trace as it leaves the process: host paths made portable first (dead-letter-paths.test.ts)
          const full = Buffer.from(withoutHostPaths(error.stack), 'utf8');
          const got = header(
            buildDeadLetter(input({ error }), { maxStackTraceBytes: max }).headers,
            H.exceptionStacktrace,
          );
          assert.ok(got.length <= max);
          assert.ok(full.subarray(0, got.length).equals(got), 'a prefix of the full trace');
          assert.ok(isCleanUtf8(got), 'valid UTF-8');
          // The longest such prefix: at most one partial character (< 4 bytes) is dropped.
          assert.ok(got.length === full.length || got.length > max - 4);
        },
      ),
    );
  });

  it('cuts at exact boundaries of 2-, 3- and 4-byte characters', () => {
    const error = new Error('m');
    error.stack = 'ab€😀é';
    const cut = (max: number): string =>
      text(buildDeadLetter(input({ error }), { maxStackTraceBytes: max }).headers, H.exceptionStacktrace);
    assert.deepEqual([0, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12].map(cut), [
      '',
      'ab',
      'ab',
      'ab',
      'ab€',
      'ab€',
      'ab€',
      'ab€😀',
      'ab€😀',
      'ab€😀é',
      'ab€😀é',
    ]);
  });

  it('defaults to 8192 bytes of stack trace and caps messages at 4096 bytes', () => {
    const error = new Error('€'.repeat(5000));
    error.stack = '😀'.repeat(5000);
    const h = buildDeadLetter(input({ error })).headers;
    assert.equal(header(h, H.exceptionStacktrace).length, 8192);
    assert.equal(header(h, H.exceptionMessage).length, 4095);
    assert.ok(isCleanUtf8(header(h, H.exceptionMessage)));
  });
});

describe('buildDeadLetter: bad input names the field', () => {
  const cases: [string, (i: DeadLetterInput) => unknown, string][] = [
    ['negative partition', (i) => ({ ...i, source: { ...i.source, partition: -1 } }), 'source.partition'],
    ['fractional partition', (i) => ({ ...i, source: { ...i.source, partition: 1.5 } }), 'source.partition'],
    [
      'partition beyond int32',
      (i) => ({ ...i, source: { ...i.source, partition: 2 ** 31 } }),
      'source.partition',
    ],
    ['string partition', (i) => ({ ...i, source: { ...i.source, partition: '3' } }), 'source.partition'],
    ['negative offset', (i) => ({ ...i, source: { ...i.source, offset: -1 } }), 'source.offset'],
    ['fractional offset', (i) => ({ ...i, source: { ...i.source, offset: 1.5 } }), 'source.offset'],
    ['non-decimal offset', (i) => ({ ...i, source: { ...i.source, offset: '0x10' } }), 'source.offset'],
    ['unsafe number offset', (i) => ({ ...i, source: { ...i.source, offset: 2 ** 53 } }), 'source.offset'],
    ['offset beyond int64', (i) => ({ ...i, source: { ...i.source, offset: 2n ** 63n } }), 'source.offset'],
    ['timestamp below -1', (i) => ({ ...i, source: { ...i.source, timestamp: -2 } }), 'source.timestamp'],
    [
      'text timestamp',
      (i) => ({ ...i, source: { ...i.source, timestamp: 'yesterday' } }),
      'source.timestamp',
    ],
    ['empty topic', (i) => ({ ...i, source: { ...i.source, topic: '' } }), 'source.topic'],
    ['illegal topic', (i) => ({ ...i, source: { ...i.source, topic: 'a b' } }), 'source.topic'],
    ['long topic', (i) => ({ ...i, source: { ...i.source, topic: 'x'.repeat(250) } }), 'source.topic'],
    [
      'timestamp type',
      (i) => ({ ...i, source: { ...i.source, timestampType: 'NOW' } }),
      'source.timestampType',
    ],
    ['string key', (i) => ({ ...i, source: { ...i.source, key: 'k' } }), 'source.key'],
    ['undefined value', (i) => ({ ...i, source: { ...i.source, value: undefined } }), 'source.value'],
    ['null headers', (i) => ({ ...i, source: { ...i.source, headers: null } }), 'source.headers'],
    ['number header', (i) => ({ ...i, source: { ...i.source, headers: { a: 5 } } }), 'source.headers["a"]'],
    [
      'number in a multi-valued header',
      (i) => ({ ...i, source: { ...i.source, headers: { a: [Buffer.from('x'), 5] } } }),
      'source.headers["a"][1]',
    ],
    ['missing source', (i) => ({ ...i, source: undefined }), 'source'],
    ['empty consumer group', (i) => ({ ...i, consumerGroup: '' }), 'consumerGroup'],
    ['unknown reason', (i) => ({ ...i, reason: 'bored' }), 'reason'],
  ];

  for (const [name, mutate, field] of cases) {
    it(`${name} → ${field}`, () => {
      assert.throws(
        () => buildDeadLetter(mutate(input()) as DeadLetterInput),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_INVALID_ARGUMENT') &&
          err.message.startsWith(`${field} `) &&
          err.details?.field === field,
      );
    });
  }

  it('a bad maxStackTraceBytes → options.maxStackTraceBytes', () => {
    for (const bad of [-1, 1.5, Number.NaN, '10']) {
      assert.throws(
        () => buildDeadLetter(input(), { maxStackTraceBytes: bad as number }),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_INVALID_ARGUMENT') && err.details?.field === 'options.maxStackTraceBytes',
      );
    }
  });
});

describe('readDeadLetterHeaders', () => {
  it('reads a record as Spring writes it (binary numbers, no group, no reason)', () => {
    const read = readDeadLetterHeaders({
      [H.originalTopic]: Buffer.from('payments'),
      [H.originalPartition]: Buffer.from([0, 0, 0, 12]),
      [H.originalOffset]: Buffer.from([0, 0, 0, 0, 0, 0, 0x30, 0x39]),
      [H.originalTimestamp]: Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
      [H.originalTimestampType]: Buffer.from('NoTimestampType'),
      [H.exceptionFqcn]: Buffer.from('org.springframework.kafka.listener.ListenerExecutionFailedException'),
      [H.exceptionCauseFqcn]: Buffer.from('java.lang.IllegalStateException'),
      [H.exceptionStacktrace]: Buffer.from('...'),
    });
    assert.deepEqual(read, {
      originalTopic: 'payments',
      originalPartition: 12,
      originalOffset: 12345n,
      originalTimestamp: -1n,
      originalTimestampType: 'NO_TIMESTAMP_TYPE',
      consumerGroup: undefined,
      exceptionFqcn: 'org.springframework.kafka.listener.ListenerExecutionFailedException',
      exceptionCauseFqcn: 'java.lang.IllegalStateException',
      exceptionMessage: undefined,
      exceptionStacktrace: '...',
      reason: undefined,
    });
  });

  it('reads numbers set by hand as decimal text', () => {
    const read = readDeadLetterHeaders({
      [H.originalTopic]: 'orders',
      [H.originalPartition]: '7',
      [H.originalOffset]: Buffer.from('123'),
      [H.originalTimestamp]: '1700000000000',
      [H.originalTimestampType]: 'CreateTime',
    });
    assert.equal(read.originalPartition, 7);
    assert.equal(read.originalOffset, 123n);
    assert.equal(read.originalTimestamp, 1_700_000_000_000n);
  });

  it('names the header that is missing or malformed', () => {
    const good = buildDeadLetter(input()).headers;
    const expectField = (headers: Record<string, HeaderValue>, name: string): void => {
      assert.throws(
        () => readDeadLetterHeaders(headers),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_INVALID_ARGUMENT') &&
          err.details?.field === `headers[${JSON.stringify(name)}]`,
      );
    };
    const { [H.originalOffset]: _omitted, ...noOffset } = good;
    expectField(noOffset, H.originalOffset);
    expectField(
      { ...good, [H.originalPartition]: Buffer.from([0xff, 0xff, 0xff, 0xff]) },
      H.originalPartition,
    );
    expectField({ ...good, [H.originalTimestamp]: Buffer.from([1, 2, 3]) }, H.originalTimestamp);
    expectField({ ...good, [H.originalTimestampType]: 'Sometime' }, H.originalTimestampType);
    expectField({ ...good, [H.reason]: 'bored' }, H.reason);
  });
});

describe('build → read round trip', () => {
  const topic = fc.stringMatching(/^[a-zA-Z0-9._-]{1,249}$/);
  const bytes = fc.oneof(
    fc.constant(null),
    fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
  );
  const headerValue = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.uint8Array({ maxLength: 20 }).map((a) => Buffer.from(a)),
    fc.array(
      fc.oneof(
        fc.string({ unit: 'grapheme', maxLength: 10 }),
        fc.uint8Array({ maxLength: 10 }).map((a) => Buffer.from(a)),
      ),
      { maxLength: 4 },
    ),
  );
  const headerName = fc
    .string({ unit: 'grapheme', maxLength: 20 })
    .filter((n) => !n.startsWith('kafka_dlt-') && n !== 'redfence-reason');
  const offset = fc
    .bigInt({ min: 0n, max: 2n ** 63n - 1n })
    .chain((o) =>
      fc.constantFrom<string | number | bigint>(
        o,
        o.toString(),
        o <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(o) : o,
      ),
    );
  const timestamp = fc
    .bigInt({ min: -1n, max: 2n ** 63n - 1n })
    .chain((t) =>
      fc.constantFrom<string | number>(
        t.toString(),
        t <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(t) : t.toString(),
      ),
    );
  const message = fc.string({ unit: 'grapheme', maxLength: 50 });
  const error = fc.oneof(
    fc.constant(undefined),
    message.map((m) => new Error(m)),
    message.map((m) => new TypeError(m)),
    message,
    fc.tuple(message, message).map(([m, c]) => new Error(m, { cause: new RangeError(c) })),
  );

  it('recovers every field for arbitrary records', () => {
    fc.assert(
      fc.property(
        fc.record({
          topic,
          partition: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          offset,
          timestamp,
          timestampType: fc.constantFrom<SourceRecord['timestampType']>(
            undefined,
            'CREATE_TIME',
            'LOG_APPEND_TIME',
          ),
          key: bytes,
          value: bytes,
          headers: fc.dictionary(headerName, headerValue, { maxKeys: 6 }),
        }),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }),
        fc.constantFrom(...REASONS),
        error,
        (src, consumerGroup, reason, err) => {
          const dlq = buildDeadLetter({ source: src, consumerGroup, reason, error: err });
          const read = readDeadLetterHeaders(dlq.headers);
          assert.equal(read.originalTopic, src.topic);
          assert.equal(read.originalPartition, src.partition);
          assert.equal(read.originalOffset, BigInt(src.offset));
          assert.equal(read.originalTimestamp, BigInt(src.timestamp));
          assert.equal(read.originalTimestampType, src.timestampType ?? 'CREATE_TIME');
          assert.equal(read.consumerGroup, consumerGroup);
          assert.equal(read.reason, reason);
          if (err instanceof Error) {
            assert.equal(read.exceptionFqcn, `redfence.${err.name}`);
            const cause = err.cause instanceof Error ? err.cause : undefined;
            assert.equal(read.exceptionCauseFqcn, cause === undefined ? undefined : 'redfence.RangeError');
            assert.equal(
              read.exceptionMessage,
              withoutHostPaths([err.message, cause?.message ?? ''].filter((m) => m !== '').join('; ')),
            );
          } else if (typeof err === 'string') {
            assert.equal(read.exceptionFqcn, 'redfence.NonErrorThrown');
            assert.equal(read.exceptionMessage, withoutHostPaths(err));
          } else {
            assert.match(read.exceptionFqcn ?? '', /^redfence\.[A-Z][A-Za-z]+$/);
          }
          assert.equal(dlq.key, src.key);
          assert.equal(dlq.value, src.value);
          for (const [name, value] of Object.entries(src.headers)) {
            const expected = Array.isArray(value)
              ? value.map((v) => Buffer.from(v))
              : Buffer.from(value as string | Buffer);
            assert.deepEqual(dlq.headers[name], expected);
          }
          assert.equal(
            Object.keys(dlq.headers).length,
            Object.keys(src.headers).length + (read.exceptionCauseFqcn ? 11 : 10),
          );
        },
      ),
    );
  });
});
