/**
 * Type tests for the main generics, checked by `tsc -p tsconfig.json --noEmit` (tsconfig.json includes
 * test/; scripts/test.sh runs it): each `@ts-expect-error` line is misuse that must not compile (tsc fails
 * if it does, "Unused '@ts-expect-error' directive"); every other line must compile, and `expectType`
 * pins what is inferred. Imports go through the entry points, as a user's do. Never run: the body is a
 * function nobody calls.
 */
import type { Cluster, Redis } from 'ioredis';
import {
  defineHandler,
  defineProcessor,
  type HandlerRecord,
  type ProcessorDefinition,
} from '../../src/index.js';
import {
  Cache,
  type CacheCodec,
  defineInvalidation,
  type IdempotencyResult,
  IdempotencyStore,
  type KitKey,
  Projection,
} from '../../src/kit/index.js';

/** Compiles only when `T` is exactly `U` (not wider, not narrower, not `any`). */
type Exact<T, U> = (<X>() => X extends T ? 1 : 2) extends <X>() => X extends U ? 1 : 2 ? true : false;
function expectType<T>() {
  return <U>(_value: U, ..._exact: Exact<T, U> extends true ? [] : [never]): void => {};
}

interface Order {
  customer: string;
  cents: number;
}
interface Totals {
  total: number;
  orders: number;
}

export function typeTests(redis: Redis | Cluster, key: KitKey): void {
  // defineProcessor: a reducer's state and record types flow from the annotations to `reduce`
  const totals = defineProcessor<Order, Totals>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    decode: (value) => JSON.parse(String(value)) as Order,
    reduce: (state, record, meta) => {
      expectType<Totals | null>()(state);
      expectType<Order>()(record);
      expectType<number>()(meta.offset);
      return { state: { total: (state?.total ?? 0) + record.cents, orders: (state?.orders ?? 0) + 1 } };
    },
  });
  expectType<ProcessorDefinition<Order, Totals>>()(totals);

  defineProcessor<Order, Totals>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    // @ts-expect-error the state itself, not `{ state }` (an easy slip that every batch would then fail on)
    reduce: (state, record) => ({ total: (state?.total ?? 0) + record.cents, orders: 1 }),
  });

  defineProcessor<Order, Totals>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    // @ts-expect-error a state of the wrong shape
    reduce: (_state, record) => ({ state: { total: String(record.cents), orders: 1 } }),
  });

  // an operation processor: `operation` returns an Operation, checked by its `op`
  defineProcessor<Order>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    operation: (record) => ({ op: 'add', by: record.cents }),
  });
  defineProcessor<Order>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    // @ts-expect-error no such operation
    operation: (record) => ({ op: 'multiply', by: record.cents }),
  });
  defineProcessor<Order>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    // @ts-expect-error the record is an Order: it has no `amount`
    operation: (record) => ({ op: 'add', by: record.amount }),
  });
  // @ts-expect-error `operation` and `reduce` together
  defineProcessor<Order, Totals>({
    input: 'orders',
    output: 'totals',
    store: 'totals',
    operation: () => ({ op: 'delete' }),
    reduce: (state) => ({ state: state ?? { total: 0, orders: 0 } }),
  });
  // @ts-expect-error `store` is required
  defineProcessor<Order>({ input: 'orders', output: 'totals', operation: () => ({ op: 'delete' }) });

  // defineHandler: `decode` fixes the record's value type for `id` and `handle`
  const handler = defineHandler<Order>({
    input: 'orders',
    name: 'billing',
    decode: (value) => JSON.parse(String(value)) as Order,
    id: (record) => record.value.customer,
    handle: async (record, ctx) => {
      expectType<HandlerRecord<Order>>()(record);
      const once = await ctx.once(async () => record.value.cents * 2);
      if (once.ran) expectType<number>()(once.value);
      // @ts-expect-error `value` exists only when the function ran
      once.value;
    },
  });
  expectType<string>()(handler.name);

  defineHandler<Order>({
    input: 'orders',
    name: 'billing',
    // @ts-expect-error decode must return the handler's record type
    decode: (value) => String(value),
    handle: async () => {},
  });
  defineHandler<Order>({
    input: 'orders',
    name: 'billing',
    // @ts-expect-error handle must return a promise
    handle: (record) => record.value.cents,
  });
  defineHandler<Order>({
    input: 'orders',
    name: 'billing',
    handle: async (record) => {
      // @ts-expect-error no such field on Order
      record.value.amount;
    },
  });

  // the kit: a cache, a projection and an idempotency store keep their value types
  const codec: CacheCodec<Totals> = {
    encode: (v) => JSON.stringify(v),
    decode: (b) => JSON.parse(b.toString()) as Totals,
  };
  const cache = new Cache<Totals>({ redis, name: 'totals', codec, ttlMs: 60_000 });
  expectType<Promise<Totals>>()(cache.get(key, async () => ({ total: 0, orders: 0 })));
  // @ts-expect-error the loader must produce the cache's value type
  cache.get(key, async () => 'zero');
  const text: CacheCodec<string> = { encode: (v) => v, decode: (b) => b.toString() };
  // @ts-expect-error a codec of another type
  new Cache<Totals>({ redis, name: 'totals', codec: text });

  const projection = new Projection<Totals>({ redis, name: 'totals', ttlMs: 60_000 });
  expectType<Promise<{ version: bigint; value: Totals } | undefined>>()(projection.get(key));
  projection.update(key, 3, { total: 1, orders: 1 });
  // @ts-expect-error a value of another type
  projection.update(key, 3, { total: '1' });

  const store = new IdempotencyStore<{ status: number }>({
    redis,
    tenant: 'shop',
    ttlMs: 86_400_000,
    inFlightTtlMs: 30_000,
  });
  expectType<Promise<IdempotencyResult<{ status: number }>>>()(
    store.run('k', 'fp', async () => ({ status: 201 })),
  );
  // @ts-expect-error the function must resolve to the stored response type
  store.run('k', 'fp', async () => 'created');

  // defineInvalidation: the keys function sees the decoded record
  defineInvalidation<Order>({
    input: { topic: 'orders' },
    name: 'orders-cache',
    cache: { name: 'totals' },
    decode: (value) => JSON.parse(String(value)) as Order,
    keys: (record) => [{ tenant: 'shop', id: record.value.customer }],
  });
  defineInvalidation<Order>({
    input: { topic: 'orders' },
    name: 'orders-cache',
    cache: { name: 'totals' },
    // @ts-expect-error no such field on Order
    keys: (record) => [{ tenant: 'shop', id: record.value.sku }],
  });
}
