-- redfence outbox, migration 001: the outbox table and what the relay needs beside it.
-- Runnable as it is by any migration tool (the objects land in the current search_path), or through
-- `redfence outbox init` (which renders it for another table name or schema: every name below starts
-- with redfence_outbox and is renamed as a whole). Idempotent: running it twice changes nothing.
--
-- The first six columns are those of Debezium's Outbox Event Router (id, aggregatetype, aggregateid,
-- type, payload, plus headers), so a team can move to CDC without a schema change.

CREATE SEQUENCE IF NOT EXISTS redfence_outbox_pos_seq;

CREATE TABLE IF NOT EXISTS redfence_outbox (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  aggregatetype text        NOT NULL,
  aggregateid   text        NOT NULL,
  type          text        NOT NULL,
  payload       jsonb,
  headers       jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- Set by the trigger below (never by the writer): publication order, per-aggregate sequence, role bucket.
  pos           bigint      NOT NULL,
  seq           bigint      NOT NULL,
  bucket        integer     NOT NULL,
  state         text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'published', 'parked')),
  attempts      integer     NOT NULL DEFAULT 0,
  last_error    text,
  published_at  timestamptz
);

-- One row per aggregate: its last sequence number. The trigger's upsert locks this row until the writer's
-- transaction ends, so two transactions writing events of one aggregate take their sequence numbers (and
-- their pos) in the order they commit: a later committer waits, then reads the earlier one's value.
CREATE TABLE IF NOT EXISTS redfence_outbox_aggregate (
  aggregatetype text   NOT NULL,
  aggregateid   text   NOT NULL,
  last_seq      bigint NOT NULL,
  PRIMARY KEY (aggregatetype, aggregateid)
);

-- Relay roles: every row's bucket maps to one role (bucket % number of roles); only the role's holder
-- publishes its rows. epoch grows at every change of holder.
CREATE TABLE IF NOT EXISTS redfence_outbox_role (
  role       integer     PRIMARY KEY,
  owner      text,
  epoch      bigint      NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL DEFAULT '-infinity'
);
-- The number of roles is fixed when the outbox is made (4 here; `redfence outbox init --roles <n>` or
-- initOutbox's `roles` set another): a later change would move aggregates to other roles while relays
-- publish them. Run again, this adds none.
INSERT INTO redfence_outbox_role (role)
  SELECT g FROM generate_series(0, 4 - 1) AS g
  WHERE NOT EXISTS (SELECT 1 FROM redfence_outbox_role);

-- Live relays (a heartbeat each): how many share the roles.
CREATE TABLE IF NOT EXISTS redfence_outbox_relay (
  owner   text        PRIMARY KEY,
  seen_at timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS redfence_outbox_pending ON redfence_outbox (pos) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS redfence_outbox_parked ON redfence_outbox (aggregatetype, aggregateid)
  WHERE state = 'parked';
CREATE INDEX IF NOT EXISTS redfence_outbox_published ON redfence_outbox (published_at)
  WHERE state = 'published';

CREATE OR REPLACE FUNCTION redfence_outbox_sequence() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO redfence_outbox_aggregate AS a (aggregatetype, aggregateid, last_seq)
    VALUES (NEW.aggregatetype, NEW.aggregateid, 1)
    ON CONFLICT (aggregatetype, aggregateid) DO UPDATE SET last_seq = a.last_seq + 1
    RETURNING a.last_seq INTO NEW.seq;
  -- pos is taken after the lock above, so within one aggregate pos order is commit order too.
  NEW.pos := nextval('redfence_outbox_pos_seq');
  NEW.bucket := ('x' || substr(md5(NEW.aggregatetype || chr(31) || NEW.aggregateid), 1, 4))::bit(16)::integer;
  RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION redfence_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  -- Delivered at commit, once per transaction (identical notifications fold into one).
  PERFORM pg_notify('redfence_outbox', '');
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS redfence_outbox_sequence ON redfence_outbox;
CREATE TRIGGER redfence_outbox_sequence BEFORE INSERT ON redfence_outbox
  FOR EACH ROW EXECUTE FUNCTION redfence_outbox_sequence();
DROP TRIGGER IF EXISTS redfence_outbox_notify ON redfence_outbox;
CREATE TRIGGER redfence_outbox_notify AFTER INSERT ON redfence_outbox
  FOR EACH STATEMENT EXECUTE FUNCTION redfence_outbox_notify();
