/** The environment works: the project's own PostgreSQL database answers. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { DATABASE_URL } from '../helpers/env.js';

describe('PostgreSQL environment', () => {
  it('connects to the project database and round-trips a value', async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 10_000 });
    await client.connect();
    try {
      const { rows } = await client.query<{ db: string; n: number }>(
        'select current_database() as db, $1::int + 1 as n',
        [41],
      );
      assert.equal(rows[0]?.n, 42);
      assert.equal(rows[0]?.db, new URL(DATABASE_URL).pathname.slice(1));
    } finally {
      await client.end();
    }
  });
});
