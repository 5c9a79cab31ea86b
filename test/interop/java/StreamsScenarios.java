/*
 * Kafka Streams itself, run on the scenarios of test/topology/scenarios.ts, for test/topology/kstreams.ts:
 * the reference the streams DSL is compared with. The test made the topics and produced the input; this
 * program builds each scenario's topology with the Kafka Streams DSL, runs it against the real broker
 * (exactly_once_v2, statestore.cache.max.bytes=0), waits until the application's committed offsets equal
 * every input topic's end offsets (and then pass the last record of its repartition topics, if any), closes it
 * and deletes its local state. One KafkaStreams instance a scenario,
 * at most `concurrency` at once, all in this one JVM.
 *
 * The topology of a scenario (see the Scenario type in test/topology/scenarios.ts):
 *   stream(inputs: one source of the list, or with "pattern" of Pattern.quote(inputs[0]) + "(-[0-9]+)?") [.filter(amount > minAmount)] [.repartition(numberOfPartitions = repartition)] .groupByKey() [.windowedBy(window) [.emitStrategy(onWindowClose)]]
 *     .count() | .aggregate(0, + amount [, merger: +]) .toStream()
 *     .map((key or windowed key, v) -> (key, {"start","end","value"}))   // start = end = -1 unwindowed
 *     [.filter(value > minCount)]
 *     [regroup: .map((key, out) -> ("k" + murmur2 partition of key among `partitions`, out.value)) .groupByKey()
 *      .reduce(+) .toStream() .mapValues(v -> {"start": -1, "end": -1, "value": v})]   // a repartition topic
 *     .to(output)
 *
 * Input on stdin, one JSON object:
 *   {"brokers": "...", "stateDir": "...", "timeoutMs": 120000, "concurrency": 4,
 *    "runs": [{"name", "applicationId", "inputs": [...], "output", "scenario": {...}, "idleMs"?: n}]}
 * A run with "idleMs" keeps running that long after its input is processed (see idle()).
 * Prints one JSON line a finished run on stdout ({"name", "ms"}); exits 1 (reason on stderr) when a run
 * fails or is not done within timeoutMs. Usage: java -cp <libs>/*:<classes> StreamsScenarios < spec.json
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

public final class StreamsScenarios {
  private StreamsScenarios() {}

  private static final ObjectMapper JSON = new ObjectMapper();

  /** One output value: the window bounds (-1 for a table) and the aggregate (null: a tombstone). */
  record Out(long start, long end, Long value) {
    String json() {
      ObjectNode o = JSON.createObjectNode();
      o.put("start", start);
      o.put("end", end);
      if (value == null) o.putNull("value");
      else o.put("value", value.longValue());
      return o.toString();
    }
  }

  /** value.amount of an input value {"amount": n}, read with Jackson as a user's serde would. */
  static long amount(String value) {
    try {
      JsonNode n = JSON.readTree(value).get("amount");
      if (n == null || !n.canConvertToLong()) throw new IllegalArgumentException("no integer amount");
      return n.asLong();
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("input value is not JSON", e);
    }
  }

  static long num(JsonNode o, String field) {
    JsonNode n = o.get(field);
    if (n == null || !n.canConvertToLong()) throw new IllegalArgumentException("scenario field " + field + " missing");
    return n.asLong();
  }

  static Out out(Windowed<String> wk, Long v) {
    return new Out(wk.window().start(), wk.window().end(), v);
  }

  /** The scenario's topology, from the input topics (one source of them all) to the output topic. */
  static StreamsBuilder topology(JsonNode sc, List<String> inputs, String output) {
    StreamsBuilder b = new StreamsBuilder();
    JsonNode pattern = sc.get("pattern");
    KStream<String, String> in =
        pattern != null && pattern.asBoolean()
            ? b.stream(
                Pattern.compile(Pattern.quote(inputs.get(0)) + "(-[0-9]+)?"),
                Consumed.with(Serdes.String(), Serdes.String()))
            : b.stream(inputs, Consumed.with(Serdes.String(), Serdes.String()));
    JsonNode minAmount = sc.get("minAmount");
    if (minAmount != null && !minAmount.isNull()) {
      long min = minAmount.asLong();
      in = in.filter((k, v) -> amount(v) > min);
    }
    JsonNode repartition = sc.get("repartition");
    if (repartition != null && !repartition.isNull()) {
      in = in.repartition(
          Repartitioned.with(Serdes.String(), Serdes.String()).withNumberOfPartitions(repartition.asInt()));
    }
    KGroupedStream<String, String> g = in.groupByKey(Grouped.with(Serdes.String(), Serdes.String()));
    boolean count = sc.get("aggregate").asText().equals("count");
    boolean fin = sc.get("emit").asText().equals("final");
    JsonNode w = sc.get("window");
    KStream<String, Out> result;
    if (w == null || w.isNull()) {
      if (fin) throw new IllegalArgumentException("emit 'final' needs a window");
      Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = Materialized.with(Serdes.String(), Serdes.Long());
      KTable<String, Long> t = count ? g.count(m) : g.aggregate(() -> 0L, (k, v, a) -> a + amount(v), m);
      result = t.toStream().mapValues(v -> new Out(-1, -1, v));
    } else if (w.get("kind").asText().equals("session")) {
      SessionWindowedKStream<String, String> s =
          g.windowedBy(
              SessionWindows.ofInactivityGapAndGrace(
                  Duration.ofMillis(num(w, "inactivityGapMs")), Duration.ofMillis(num(w, "graceMs"))));
      if (fin) s = s.emitStrategy(EmitStrategy.onWindowClose());
      Materialized<String, Long, SessionStore<Bytes, byte[]>> m = Materialized.with(Serdes.String(), Serdes.Long());
      KTable<Windowed<String>, Long> t =
          count ? s.count(m) : s.aggregate(() -> 0L, (k, v, a) -> a + amount(v), (k, a, c) -> a + c, m);
      result = t.toStream().map((wk, v) -> KeyValue.pair(wk.key(), out(wk, v)));
    } else {
      TimeWindowedKStream<String, String> tw = timeWindowed(g, w);
      if (fin) tw = tw.emitStrategy(EmitStrategy.onWindowClose());
      Materialized<String, Long, WindowStore<Bytes, byte[]>> m = Materialized.with(Serdes.String(), Serdes.Long());
      KTable<Windowed<String>, Long> t = count ? tw.count(m) : tw.aggregate(() -> 0L, (k, v, a) -> a + amount(v), m);
      result = t.toStream().map((wk, v) -> KeyValue.pair(wk.key(), out(wk, v)));
    }
    JsonNode minCount = sc.get("minCount");
    if (minCount != null && !minCount.isNull()) {
      long min = minCount.asLong();
      result = result.filter((k, o) -> o.value() != null && o.value() > min);
    }
    JsonNode throwEvery = sc.get("throwEvery");
    if (throwEvery != null && !throwEvery.isNull()) {
      long every = throwEvery.asLong();
      result =
          result.filter(
              (k, o) -> {
                if (o.value() != null && o.value() % every == 0)
                  throw new IllegalStateException("a multiple of throwEvery");
                return true;
              });
    }
    JsonNode regroup = sc.get("regroup");
    if (regroup != null && !regroup.isNull()) {
      boolean twice = regroup.asText().equals("sum-and-count");
      if (!twice && !regroup.asText().equals("sum")) throw new IllegalArgumentException("unknown regroup " + regroup);
      // a second aggregation: the updates' values summed per k<input partition of their key>
      int partitions = (int) num(sc, "partitions");
      Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = Materialized.with(Serdes.String(), Serdes.Long());
      KGroupedStream<String, Long> regrouped =
          result
              .map(
                  (k, o) ->
                      KeyValue.pair(
                          "k" + Utils.toPositive(Utils.murmur2(k.getBytes(java.nio.charset.StandardCharsets.UTF_8))) % partitions,
                          o.value()))
              .groupByKey(
                  twice
                      ? Grouped.with("regroup", Serdes.String(), Serdes.Long())
                      : Grouped.with(Serdes.String(), Serdes.Long()));
      regrouped
          .reduce(Long::sum, m)
          .toStream()
          .mapValues(v -> new Out(-1, -1, v).json())
          .to(output, Produced.with(Serdes.String(), Serdes.String()));
      if (twice)
        regrouped
            .count(Materialized.with(Serdes.String(), Serdes.Long()))
            .toStream()
            .mapValues(v -> new Out(-2, -2, v).json())
            .to(output, Produced.with(Serdes.String(), Serdes.String()));
      return b;
    }
    result.mapValues(Out::json).to(output, Produced.with(Serdes.String(), Serdes.String()));
    return b;
  }

  static TimeWindowedKStream<String, String> timeWindowed(KGroupedStream<String, String> g, JsonNode w) {
    Duration grace = Duration.ofMillis(num(w, "graceMs"));
    switch (w.get("kind").asText()) {
      case "tumbling":
        return g.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(num(w, "sizeMs")), grace));
      case "hopping":
        return g.windowedBy(
            TimeWindows.ofSizeAndGrace(Duration.ofMillis(num(w, "sizeMs")), grace)
                .advanceBy(Duration.ofMillis(num(w, "advanceMs"))));
      case "sliding":
        return g.windowedBy(
            SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(num(w, "timeDifferenceMs")), grace));
      default:
        throw new IllegalArgumentException("unknown window kind " + w.get("kind"));
    }
  }

  static Properties props(String brokers, String applicationId, String stateDir) {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    // onWindowClose emits the closed windows at most once per this interval of wall-clock time (default
    // 1 s): with 0 every record that closes a window emits it, so what is emitted does not depend on
    // how fast the input was read.
    p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
    return p;
  }

  /** Runs one scenario to the end of its input; returns its time in ms. */
  static long run(Admin admin, JsonNode spec, JsonNode r, long deadline) throws Exception {
    String name = r.get("name").asText();
    String appId = r.get("applicationId").asText();
    List<String> inputs = new ArrayList<>();
    r.get("inputs").forEach(t -> inputs.add(t.asText()));
    if (inputs.isEmpty()) throw new IllegalArgumentException(name + ": no input topics");
    Map<TopicPartition, Long> ends = new HashMap<>();
    for (String input : inputs) ends.putAll(endOffsets(admin, input));
    File state = new File(spec.get("stateDir").asText(), appId);
    long t0 = System.currentTimeMillis();
    Topology topology = topology(r.get("scenario"), inputs, r.get("output").asText()).build();
    Properties props = props(spec.get("brokers").asText(), appId, state.getPath());
    JsonNode throwEvery = r.get("scenario").get("throwEvery");
    if (throwEvery != null && !throwEvery.isNull())
      // KIP-1033: a processor that throws drops its record at that node; the store keeps its update
      props.put(
          StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG,
          LogAndContinueProcessingExceptionHandler.class.getName());
    KafkaStreams streams = new KafkaStreams(topology, props);
    Throwable[] failed = new Throwable[1];
    streams.setUncaughtExceptionHandler(
        e -> {
          failed[0] = e;
          return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
              .SHUTDOWN_CLIENT;
        });
    try {
      streams.start();
      while (!committed(admin, appId, ends)) {
        if (failed[0] != null) throw new IllegalStateException(name + ": Kafka Streams failed", failed[0]);
        KafkaStreams.State s = streams.state();
        if (s == KafkaStreams.State.ERROR || s == KafkaStreams.State.NOT_RUNNING)
          throw new IllegalStateException(name + ": Kafka Streams stopped (" + s + ")");
        if (System.currentTimeMillis() > deadline)
          throw new IllegalStateException(name + ": input not processed in time (state " + s + ")");
        Thread.sleep(100);
      }
      // then what the input's transactions wrote to the repartition topics (a repartition() scenario)
      Map<TopicPartition, Long> internal = repartitionEnds(admin, appId, topology);
      while (!committedPast(admin, appId, internal)) {
        if (failed[0] != null) throw new IllegalStateException(name + ": Kafka Streams failed", failed[0]);
        if (System.currentTimeMillis() > deadline)
          throw new IllegalStateException(name + ": repartition topics not processed in time");
        Thread.sleep(100);
      }
      idle(admin, r, appId, inputs, failed, deadline);
      return System.currentTimeMillis() - t0;
    } finally {
      streams.close(Duration.ofSeconds(30));
      streams.cleanUp();
    }
  }

  /**
   * A run's "idleMs": with its input processed, Kafka Streams runs on idle this long more (wall clock),
   * then reads what its input topics received meanwhile (another reader's records: redfence's ticks, a
   * null key its aggregation drops) until the group has committed past their last record. Stream time
   * moves with records only, so this emits nothing the input did not: the idle-close comparison
   * (test/topology/kstreams-idle-close.test.ts) pins that.
   */
  static void idle(
      Admin admin, JsonNode r, String appId, List<String> inputs, Throwable[] failed, long deadline)
      throws Exception {
    long idleMs = r.path("idleMs").asLong(0);
    if (idleMs <= 0) return;
    // The idle time is what the scenario tests (Kafka Streams given wall-clock time and no record), not a
    // wait for an event: it runs its whole length, watching for a failure every 100 ms.
    long until = System.currentTimeMillis() + idleMs;
    while (System.currentTimeMillis() < until) {
      if (failed[0] != null) throw new IllegalStateException(appId + ": Kafka Streams failed", failed[0]);
      Thread.sleep(100); // pacing: the failure check within the idle time
    }
    Map<TopicPartition, Long> ends = new HashMap<>();
    for (String input : inputs) ends.putAll(endOffsets(admin, input));
    while (!committedPast(admin, appId, ends)) {
      if (failed[0] != null) throw new IllegalStateException(appId + ": Kafka Streams failed", failed[0]);
      if (System.currentTimeMillis() > deadline)
        throw new IllegalStateException(appId + ": records appended while idle not processed in time");
      Thread.sleep(100); // pacing: polling the group's commits until they pass the ends
    }
  }

  static Map<TopicPartition, Long> endOffsets(Admin admin, String topic) throws Exception {
    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    Map<TopicPartition, OffsetSpec> req = new HashMap<>();
    d.partitions().forEach(p -> req.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest()));
    Map<TopicPartition, Long> ends = new HashMap<>();
    admin.listOffsets(req).all().get().forEach((tp, info) -> ends.put(tp, info.offset()));
    return ends;
  }

  /** True once the group has committed every partition that holds records up to its end offset. */
  static boolean committed(Admin admin, String group, Map<TopicPartition, Long> ends) throws Exception {
    Map<TopicPartition, OffsetAndMetadata> at =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
      if (e.getValue() == 0) continue;
      OffsetAndMetadata o = at.get(e.getKey());
      if (o == null || o.offset() < e.getValue()) return false;
    }
    return true;
  }

  /** The end offsets of the topology's repartition topics (none without a repartition). */
  static Map<TopicPartition, Long> repartitionEnds(Admin admin, String appId, Topology topology)
      throws Exception {
    Map<TopicPartition, Long> ends = new HashMap<>();
    for (TopologyDescription.Subtopology sub : topology.describe().subtopologies())
      for (TopologyDescription.Node n : sub.nodes())
        if (n instanceof TopologyDescription.Source src && src.topicSet() != null)
          for (String t : src.topicSet())
            if (t.endsWith("-repartition")) ends.putAll(endOffsets(admin, appId + "-" + t));
    return ends;
  }

  /**
   * True once the group has committed past the last record of every partition that holds records.
   * The repartition topics are written in transactions: their last offset is a commit marker, which
   * the committed offset need not pass.
   */
  static boolean committedPast(Admin admin, String group, Map<TopicPartition, Long> ends) throws Exception {
    Map<TopicPartition, OffsetAndMetadata> at =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
      if (e.getValue() == 0) continue;
      OffsetAndMetadata o = at.get(e.getKey());
      if (o == null || o.offset() < e.getValue() - 1) return false;
    }
    return true;
  }

  public static void main(String[] args) throws Exception {
    JsonNode spec = JSON.readTree(System.in);
    long deadline = System.currentTimeMillis() + spec.path("timeoutMs").asLong(120_000);
    int concurrency = Math.max(1, spec.path("concurrency").asInt(4));
    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, spec.get("brokers").asText());
    int code = 0;
    ExecutorService pool = Executors.newFixedThreadPool(concurrency);
    try (Admin admin = Admin.create(ap)) {
      List<JsonNode> runs = new ArrayList<>();
      spec.get("runs").forEach(runs::add);
      List<Future<Long>> done = new ArrayList<>();
      for (JsonNode r : runs) done.add(pool.submit(() -> run(admin, spec, r, deadline)));
      for (int i = 0; i < runs.size(); i++) {
        String name = runs.get(i).get("name").asText();
        try {
          long ms = done.get(i).get();
          ObjectNode line = JSON.createObjectNode();
          line.put("name", name);
          line.put("ms", ms);
          synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
          }
        } catch (java.util.concurrent.ExecutionException e) {
          System.err.println("scenario " + name + " failed: " + e.getCause());
          e.getCause().printStackTrace();
          code = 1;
        }
      }
    } finally {
      pool.shutdownNow();
      pool.awaitTermination(40, TimeUnit.SECONDS);
    }
    System.exit(code);
  }
}
