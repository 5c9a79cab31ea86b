package dev.redfence.bench;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import java.time.Duration;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Kafka Streams peer of the redfence processor benchmark: per customer (the record key), total = sum of
 * "amount" and count, kept in a persistent RocksDB key-value store; for every input record the new state
 * {"total":..,"count":..} is written to the output topic, keyed by customer. exactly_once_v2. Orders are
 * read, and outputs written, by a Jackson serde (KS_PARSE=json, the default), as redfence parses JSON.
 *
 * <p>Configuration from the environment (run.ts sets it):
 * KS_BROKERS, KS_INPUT, KS_OUTPUT, KS_APP_ID, KS_STATE_DIR, KS_THREADS (1), KS_CACHE_BYTES (0; "default"
 * keeps the Streams default of 10 MiB), KS_SESSION_TIMEOUT_MS (unset: the consumer default, 45 s),
 * KS_GROUP_INSTANCE_ID (unset: dynamic membership; set: the consumers' group.instance.id, static membership), KS_PARSE
 * ("json": orders read and outputs written by a Jackson serde, as an application would; "scan": the earlier
 * hand-written scan for the amount and a hand-built output string), KS_TOPOLOGY ("totals", the default: the
 * processor benchmark's aggregation; "fraud" and "windowed-count": bench/topology's topologies, see
 * {@link #windowed}).
 *
 * <p>Prints one line per event on stdout, for run.ts: "STATE <epoch ms> <old> <new>", "RESTORE_START <epoch ms>
 * <topic-partition> <start> <end>", "RESTORE_END <epoch ms> <topic-partition> <records>".
 */
public final class KafkaStreamsPeer {
  private KafkaStreamsPeer() {}

  static String env(String name, String fallback) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) {
      if (fallback == null) throw new IllegalArgumentException("missing env " + name);
      return fallback;
    }
    return v;
  }

  /** An order as the benchmark writes it: {"customer": "...", "amount": n, "pad": "..."}. */
  public record Order(String customer, long amount, String pad) {}

  /** The output value: {"total":..,"count":..}. */
  public record Totals(long total, long count) {}

  /** A Jackson serde of one class (what an application would write, or take from a serde library). */
  static final class JsonSerde<T> implements Serde<T> {
    private static final ObjectMapper MAPPER =
        new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    private final Class<T> type;

    JsonSerde(Class<T> type) {
      this.type = type;
    }

    @Override
    public Serializer<T> serializer() {
      return (topic, v) -> {
        try {
          return v == null ? null : MAPPER.writeValueAsBytes(v);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      };
    }

    @Override
    public Deserializer<T> deserializer() {
      return (topic, b) -> {
        try {
          return b == null ? null : MAPPER.readValue(b, type);
        } catch (IOException e) {
          throw new org.apache.kafka.common.errors.SerializationException("not a " + type.getSimpleName(), e);
        }
      };
    }
  }

  /** KS_PARSE=scan only: the integer after "amount": in the order JSON (the benchmark's orders are flat). */
  static long amount(String json) {
    int i = json.indexOf("\"amount\":");
    if (i < 0) throw new IllegalArgumentException("no amount in " + json);
    i += 9;
    while (json.charAt(i) == ' ') i++;
    boolean neg = json.charAt(i) == '-';
    if (neg) i++;
    long n = 0;
    for (; i < json.length(); i++) {
      char c = json.charAt(i);
      if (c < '0' || c > '9') break;
      n = n * 10 + (c - '0');
    }
    return neg ? -n : n;
  }

  /** A window's count as bench/topology writes it: {"start":..,"end":..,"count":..}. */
  public record WindowCount(long start, long end, long count) {}

  /**
   * bench/topology's topologies, the same as its redfence side builds them (KS_WINDOW_MS, KS_GRACE_MS):
   * "fraud": orders -> filter(amount > 50) -> groupByKey -> tumbling windows -> count -> toStream ->
   * filter(count > 10) -> (customer, {start, end, count}); "windowed-count": the same without the two
   * filters. Every update is forwarded (cache 0 in the benchmark), in a persistent RocksDB window store.
   */
  static void windowed(StreamsBuilder b, String input, String output, String topology) {
    boolean fraud = topology.equals("fraud");
    if (!fraud && !topology.equals("windowed-count"))
      throw new IllegalArgumentException("KS_TOPOLOGY must be totals, fraud or windowed-count, not " + topology);
    long size = Long.parseLong(env("KS_WINDOW_MS", null));
    long grace = Long.parseLong(env("KS_GRACE_MS", null));
    JsonSerde<Order> orders = new JsonSerde<>(Order.class);
    var s = b.stream(input, Consumed.with(Serdes.String(), orders));
    if (fraud) s = s.filter((customer, o) -> o.amount() > 50);
    var counts =
        s.groupByKey(Grouped.with(Serdes.String(), orders))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
            .count(
                Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("counts")
                    .withKeySerde(Serdes.String())
                    .withValueSerde(Serdes.Long()))
            .toStream();
    if (fraud) counts = counts.filter((w, n) -> n > 10);
    counts
        .map((w, n) -> KeyValue.pair(w.key(), new WindowCount(w.window().start(), w.window().end(), n)))
        .to(output, Produced.with(Serdes.String(), new JsonSerde<>(WindowCount.class)));
  }

  /** Aggregate: total and count, stored as 16 bytes. */
  record Agg(long total, long count) {}

  static final class AggSerde implements Serde<Agg> {
    @Override
    public Serializer<Agg> serializer() {
      return (topic, a) -> a == null ? null : ByteBuffer.allocate(16).putLong(a.total()).putLong(a.count()).array();
    }

    @Override
    public Deserializer<Agg> deserializer() {
      return (topic, b) -> {
        if (b == null) return null;
        ByteBuffer buf = ByteBuffer.wrap(b);
        return new Agg(buf.getLong(), buf.getLong());
      };
    }
  }

  static synchronized void emit(String line) {
    System.out.println(line);
    System.out.flush();
  }

  public static void main(String[] args) throws Exception {
    String input = env("KS_INPUT", null);
    String output = env("KS_OUTPUT", null);
    String cache = env("KS_CACHE_BYTES", "0");
    String parse = env("KS_PARSE", "json");

    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, env("KS_APP_ID", null));
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env("KS_BROKERS", "127.0.0.1:19092"));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(env("KS_THREADS", "1")));
    p.put(StreamsConfig.STATE_DIR_CONFIG, env("KS_STATE_DIR", null));
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
    p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 0);
    if (!cache.equals("default")) p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(cache));
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    String session = System.getenv("KS_SESSION_TIMEOUT_MS");
    if (session != null && !session.isEmpty()) {
      p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), Integer.parseInt(session));
      p.put(
          StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG),
          Math.max(500, Integer.parseInt(session) / 3));
    }
    // static membership (KIP-345): a replacement started with the same id takes the dead member's place at
    // once; Kafka Streams suffixes it per stream thread
    String instance = System.getenv("KS_GROUP_INSTANCE_ID");
    if (instance != null && !instance.isEmpty())
      p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), instance);
    // commit.interval.ms: not set, so the exactly-once default (100 ms) applies.

    StreamsBuilder b = new StreamsBuilder();
    Materialized<String, Agg, KeyValueStore<Bytes, byte[]>> totals =
        Materialized.<String, Agg, KeyValueStore<Bytes, byte[]>>as("totals")
            .withKeySerde(Serdes.String())
            .withValueSerde(new AggSerde());
    String topology = env("KS_TOPOLOGY", "totals");
    if (!topology.equals("totals")) {
      windowed(b, input, output, topology);
    } else if (parse.equals("scan")) {
      b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
          .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
          .aggregate(
              () -> new Agg(0, 0), (customer, order, agg) -> new Agg(agg.total() + amount(order), agg.count() + 1), totals)
          .toStream()
          .mapValues(a -> "{\"total\":" + a.total() + ",\"count\":" + a.count() + "}")
          .to(output, Produced.with(Serdes.String(), Serdes.String()));
    } else if (parse.equals("json")) {
      JsonSerde<Order> orders = new JsonSerde<>(Order.class);
      b.stream(input, Consumed.with(Serdes.String(), orders))
          .groupByKey(Grouped.with(Serdes.String(), orders))
          .aggregate(
              () -> new Agg(0, 0), (customer, order, agg) -> new Agg(agg.total() + order.amount(), agg.count() + 1), totals)
          .toStream()
          .mapValues(a -> new Totals(a.total(), a.count()))
          .to(output, Produced.with(Serdes.String(), new JsonSerde<>(Totals.class)));
    } else {
      throw new IllegalArgumentException("KS_PARSE must be json or scan, not " + parse);
    }

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    CountDownLatch done = new CountDownLatch(1);
    streams.setStateListener(
        (now, old) -> {
          emit("STATE " + System.currentTimeMillis() + " " + old + " " + now);
          if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) done.countDown();
        });
    streams.setGlobalStateRestoreListener(
        new StateRestoreListener() {
          @Override
          public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            emit("RESTORE_START " + System.currentTimeMillis() + " " + tp + " " + start + " " + end);
          }

          @Override
          public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

          @Override
          public void onRestoreEnd(TopicPartition tp, String store, long total) {
            emit("RESTORE_END " + System.currentTimeMillis() + " " + tp + " " + total);
          }
        });
    streams.setUncaughtExceptionHandler(
        e -> {
          System.err.println("uncaught: " + e);
          e.printStackTrace();
          return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
              .SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close(java.time.Duration.ofSeconds(20));
                  done.countDown();
                }));
    emit("START " + System.currentTimeMillis() + " " + Map.of("cache", cache, "parse", parse));
    streams.start();
    done.await();
  }
}
