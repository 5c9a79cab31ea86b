/*
 * The real dead-letter writers of the JVM world, run against a real broker, for
 * test/dead-letter/interop.test.ts (one JVM run does everything; the test made the topics and the
 * source records):
 *
 *  1. Spring Kafka's DeadLetterPublishingRecoverer (a KafkaTemplate and the recoverer, driven the way
 *     Spring's DefaultErrorHandler drives it: accept(record, consumer, exception)) dead-letters the
 *     records of <p>-spring-src whose value starts with "bad:" (a plain exception) or "bad-listener:"
 *     (the ListenerExecutionFailedException with a group id that the listener container passes on).
 *  2. Kafka Streams' dead-letter queue (KIP-1034, errors.dead.letter.queue.topic.name) with the
 *     built-in LogAndContinue handlers: a value that is not 8 bytes fails LongDeserializer, the value
 *     13 fails the topology's mapValues.
 *  3. Kafka Connect's DeadLetterQueueReporter with errors.deadletterqueue.context.headers.enable=true,
 *     driven as WorkerSinkTask does: JsonConverter.toConnectData fails in stage VALUE_CONVERTER.
 *  4. A Spring consumer reads <p>-redfence-dlt (dead letters written by redfence): the record is
 *     converted by Spring's MessagingMessageConverter (what a @KafkaListener gets) and its headers
 *     read by the KafkaHeaders constants, with the encodings Spring's reference documents; then the
 *     recoverer dead-letters those records again to <p>-twice-dlt (a second hop on redfence's headers).
 *
 * Prints one JSON object a line on stdout: what each writer was handed (the consumed record's
 * coordinates and the exception thrown) and what Spring read. Usage:
 *   java -cp <libs>/*:<classes> DlqInterop <bootstrap> <prefix> <state dir> <deadline seconds>
 */
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.ConnectMetrics;
import org.apache.kafka.connect.runtime.SinkConnectorConfig;
import org.apache.kafka.connect.runtime.errors.DeadLetterQueueReporter;
import org.apache.kafka.connect.runtime.errors.ErrorHandlingMetrics;
import org.apache.kafka.connect.runtime.errors.ProcessingContext;
import org.apache.kafka.connect.runtime.errors.Stage;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.standalone.StandaloneConfig;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.DeserializationExceptionHandler;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.apache.kafka.streams.errors.LogAndContinueExceptionHandler;
import org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler;
import org.apache.kafka.streams.errors.ProcessingExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.processor.api.Record;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.ListenerExecutionFailedException;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.kafka.support.converter.MessagingMessageConverter;
import org.springframework.messaging.MessageHeaders;

public final class DlqInterop {
  private static final ObjectMapper JSON = new ObjectMapper();
  /** What the Streams handlers were handed, in the order they were called. */
  static final ConcurrentLinkedQueue<Map<String, Object>> STREAMS_FAILURES = new ConcurrentLinkedQueue<>();

  private DlqInterop() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: DlqInterop <bootstrap> <prefix> <state dir> <deadline seconds>");
      System.exit(2);
    }
    String bootstrap = args[0];
    String p = args[1];
    String stateDir = args[2];
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[3]));
    long t0 = System.nanoTime();
    spring(bootstrap, p + "-spring-src", p + "-spring-dlt");
    t0 = took("Spring Kafka", t0);
    streams(bootstrap, p + "-streams-src", p + "-streams-dlt", p + "-streams-app", stateDir, deadline);
    t0 = took("Kafka Streams", t0);
    connect(bootstrap, p + "-connect-src", p + "-connect-dlt", stateDir);
    t0 = took("Kafka Connect", t0);
    springReads(bootstrap, p + "-redfence-dlt");
    // a Spring application that consumes redfence's dead-letter topic fails too and dead-letters
    // them again: a second hop on top of redfence's headers
    springRecover(bootstrap, p + "-redfence-dlt", p + "-twice-dlt", "spring-twice",
        r -> listenerFailure("spring-audit", new IllegalStateException("still failing")));
    took("Spring reading and re-dead-lettering redfence's dead letters", t0);
    System.out.flush();
  }

  /** Logs how long a step took (stderr, for the test's failure message); returns now. */
  static long took(String what, long since) {
    long now = System.nanoTime();
    System.err.printf("DlqInterop: %s in %d ms%n", what, TimeUnit.NANOSECONDS.toMillis(now - since));
    return now;
  }

  static synchronized void emit(Map<String, Object> line) throws Exception {
    System.out.println(JSON.writeValueAsString(line));
  }

  static Map<String, Object> source(String writer, ConsumerRecord<byte[], byte[]> r, Throwable e) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("writer", writer);
    m.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
    m.put("topic", r.topic());
    m.put("partition", r.partition());
    m.put("offset", r.offset());
    m.put("timestamp", r.timestamp());
    m.put("exceptionClass", e.getClass().getName());
    m.put("exceptionMessage", e.getMessage());
    return m;
  }

  static Map<String, Object> clientProps(String bootstrap) {
    Map<String, Object> props = new HashMap<>();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    return props;
  }

  /** Every record of the topic, from the beginning to the end offsets it has now. */
  static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic) {
    Map<String, Object> props = clientProps(bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      consumer.partitionsFor(topic, Duration.ofSeconds(15))
          .forEach(i -> tps.add(new TopicPartition(topic, i.partition())));
      if (tps.isEmpty()) throw new IllegalStateException("topic " + topic + " does not exist");
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(15));
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (tps.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
        if (System.nanoTime() > until) throw new IllegalStateException("reading " + topic + " timed out");
        consumer.poll(Duration.ofMillis(200)).forEach(out::add);
      }
    }
    return out;
  }

  // ------------------------------------------------------------------------------- Spring Kafka

  /**
   * What Spring's listener container hands the recoverer when a @KafkaListener method throws: the
   * adapter's ListenerExecutionFailedException, re-made with the group id, around the exception.
   */
  static Exception listenerFailure(String group, Exception thrown) {
    return new ListenerExecutionFailedException(
        "Listener method 'public void Billing.listen(byte[])' threw exception", group, thrown);
  }

  static void spring(String bootstrap, String src, String dlt) throws Exception {
    springRecover(bootstrap, src, dlt, "spring", r -> {
      String value = new String(r.value(), StandardCharsets.UTF_8);
      if (value.startsWith("bad:"))
        return new IllegalArgumentException("amount is not a number in " + value.substring(4));
      if (value.startsWith("bad-listener:"))
        return listenerFailure("spring-billing", new IllegalStateException("stock service down for " + value.substring(13)));
      return null;
    });
  }

  /** Spring dead-letters each record of `src` that `failure` fails, to `dlt` (same partition). */
  static void springRecover(String bootstrap, String src, String dlt, String writer,
      Function<ConsumerRecord<byte[], byte[]>, Exception> failure) throws Exception {
    Map<String, Object> props = clientProps(bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    DefaultKafkaProducerFactory<byte[], byte[]> factory = new DefaultKafkaProducerFactory<>(props);
    try {
      KafkaTemplate<byte[], byte[]> template = new KafkaTemplate<>(factory);
      // the usual application set-up: a named dead-letter topic, the record's own partition
      DeadLetterPublishingRecoverer recoverer =
          new DeadLetterPublishingRecoverer(template, (r, e) -> new TopicPartition(dlt, r.partition()));
      for (ConsumerRecord<byte[], byte[]> r : readAll(bootstrap, src)) {
        Exception e = failure.apply(r);
        if (e == null) continue;
        recoverer.accept(r, null, e); // publishes and waits for the send result
        Map<String, Object> m = source(writer, r, e);
        if (e instanceof ListenerExecutionFailedException l) {
          m.put("group", l.getGroupId());
          m.put("causeClass", l.getCause().getClass().getName());
          m.put("causeMessage", l.getCause().getMessage());
        }
        emit(m);
      }
    } finally {
      factory.destroy();
    }
  }

  // ------------------------------------------------------------------------------ Kafka Streams

  /** The built-in handler (it builds the dead-letter record); the test also learns what it saw. */
  public static final class RecordingDeserializationHandler extends LogAndContinueExceptionHandler {
    @Override
    public DeserializationExceptionHandler.Response handleError(
        ErrorHandlerContext context, ConsumerRecord<byte[], byte[]> record, Exception exception) {
      STREAMS_FAILURES.add(streamsFailure(context, record.key(), exception));
      return super.handleError(context, record, exception);
    }
  }

  public static final class RecordingProcessingHandler extends LogAndContinueProcessingExceptionHandler {
    @Override
    public ProcessingExceptionHandler.Response handleError(
        ErrorHandlerContext context, Record<?, ?> record, Exception exception) {
      STREAMS_FAILURES.add(streamsFailure(context, context.sourceRawKey(), exception));
      return super.handleError(context, record, exception);
    }
  }

  static Map<String, Object> streamsFailure(ErrorHandlerContext c, byte[] key, Exception e) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("writer", "streams");
    m.put("key", key == null ? null : new String(key, StandardCharsets.UTF_8));
    m.put("topic", c.topic());
    m.put("partition", c.partition());
    m.put("offset", c.offset());
    m.put("timestamp", c.timestamp());
    m.put("exceptionClass", e.getClass().getName());
    m.put("exceptionMessage", e.getMessage());
    return m;
  }

  static void streams(String bootstrap, String src, String dlt, String appId, String stateDir, long deadline)
      throws Exception {
    int expected = 0;
    for (ConsumerRecord<byte[], byte[]> r : readAll(bootstrap, src)) {
      if (r.value().length != 8 || ByteBuffer.wrap(r.value()).getLong() == 13L) expected++;
    }
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir + "/streams");
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    props.put(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, dlt);
    props.put(StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG, RecordingDeserializationHandler.class);
    props.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG, RecordingProcessingHandler.class);
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(src, Consumed.with(Serdes.String(), Serdes.Long()))
        .mapValues((k, v) -> {
          if (v == 13L) throw new IllegalStateException("unlucky value 13 for key " + k);
          return v + 1;
        })
        .foreach((k, v) -> {});
    try (KafkaStreams app = new KafkaStreams(builder.build(), props)) {
      app.start();
      // done when every failure has reached the dead-letter topic
      while (STREAMS_FAILURES.size() < expected || countOf(bootstrap, dlt) < expected) {
        if (System.nanoTime() > deadline)
          throw new IllegalStateException("Kafka Streams wrote " + countOf(bootstrap, dlt) + " of "
              + expected + " dead letters in time (handlers called " + STREAMS_FAILURES.size() + " times)");
        Thread.sleep(100);
      }
      app.close(Duration.ofSeconds(10));
    }
    for (Map<String, Object> m : STREAMS_FAILURES) emit(m);
  }

  static long countOf(String bootstrap, String topic) {
    Map<String, Object> props = clientProps(bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      consumer.partitionsFor(topic, Duration.ofSeconds(15))
          .forEach(i -> tps.add(new TopicPartition(topic, i.partition())));
      return consumer.endOffsets(tps, Duration.ofSeconds(15)).values().stream().mapToLong(Long::longValue).sum();
    }
  }

  // ------------------------------------------------------------------------------ Kafka Connect

  static void connect(String bootstrap, String src, String dlt, String stateDir) throws Exception {
    long start = System.nanoTime();
    Map<String, String> worker = new HashMap<>();
    worker.put("bootstrap.servers", bootstrap);
    worker.put("key.converter", JsonConverter.class.getName());
    worker.put("value.converter", JsonConverter.class.getName());
    worker.put("offset.storage.file.filename", stateDir + "/connect.offsets");
    worker.put("plugin.discovery", "service_load");
    StandaloneConfig workerConfig = new StandaloneConfig(worker);
    Map<String, String> connector = new HashMap<>();
    connector.put("name", "interop-sink");
    connector.put("connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector");
    connector.put("topics", src);
    connector.put("errors.tolerance", "all");
    connector.put("errors.deadletterqueue.topic.name", dlt);
    connector.put("errors.deadletterqueue.topic.replication.factor", "1");
    connector.put("errors.deadletterqueue.context.headers.enable", "true");
    // service_load: the plugins on the class path by their ServiceLoader manifests (no class scan)
    Plugins plugins = new Plugins(Map.of("plugin.discovery", "service_load"));
    SinkConnectorConfig sinkConfig = new SinkConnectorConfig(plugins, connector);
    took("Connect plugins and configuration", start);
    ConnectorTaskId task = new ConnectorTaskId("interop-sink", 0);
    ConnectMetrics metrics = new ConnectMetrics("interop-worker", workerConfig, Time.SYSTEM, "interop");
    JsonConverter converter = new JsonConverter();
    converter.configure(Map.of("schemas.enable", "false"), false);
    // as the Worker hands them to the reporter (Worker.baseProducerConfigs)
    Map<String, Object> producer = clientProps(bootstrap);
    producer.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    producer.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    try (ErrorHandlingMetrics errorMetrics = new ErrorHandlingMetrics(task, metrics);
        DeadLetterQueueReporter reporter = DeadLetterQueueReporter.createAndSetup(
            clientProps(bootstrap), task, sinkConfig, producer, errorMetrics)) {
      for (ConsumerRecord<byte[], byte[]> r : readAll(bootstrap, src)) {
        ProcessingContext<ConsumerRecord<byte[], byte[]>> context = new ProcessingContext<>(r);
        context.currentContext(Stage.VALUE_CONVERTER, converter.getClass());
        try {
          converter.toConnectData(r.topic(), r.headers(), r.value());
          continue;
        } catch (DataException e) {
          context.error(e);
        }
        reporter.report(context).get(15, TimeUnit.SECONDS);
        emit(source("connect", r, context.error()));
      }
    } finally {
      metrics.stop();
    }
  }

  // ------------------------------------------- a Spring consumer reads redfence's dead letters

  static void springReads(String bootstrap, String topic) throws Exception {
    MessagingMessageConverter converter = new MessagingMessageConverter();
    for (ConsumerRecord<byte[], byte[]> r : readAll(bootstrap, topic)) {
      MessageHeaders h = converter.toMessage(r, null, null, byte[].class).getHeaders();
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("writer", "spring-reads");
      m.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
      m.put("originalTopic", text(h, KafkaHeaders.DLT_ORIGINAL_TOPIC));
      byte[] partition = bytes(h, KafkaHeaders.DLT_ORIGINAL_PARTITION);
      m.put("originalPartition", partition == null ? null : ByteBuffer.wrap(partition).getInt());
      byte[] offset = bytes(h, KafkaHeaders.DLT_ORIGINAL_OFFSET);
      m.put("originalOffset", offset == null ? null : ByteBuffer.wrap(offset).getLong());
      byte[] ts = bytes(h, KafkaHeaders.DLT_ORIGINAL_TIMESTAMP);
      m.put("originalTimestamp", ts == null ? null : ByteBuffer.wrap(ts).getLong());
      String type = text(h, KafkaHeaders.DLT_ORIGINAL_TIMESTAMP_TYPE);
      m.put("originalTimestampType", type == null ? null : TimestampType.forName(type).name());
      m.put("consumerGroup", text(h, KafkaHeaders.DLT_ORIGINAL_CONSUMER_GROUP));
      m.put("exceptionClass", text(h, KafkaHeaders.DLT_EXCEPTION_FQCN));
      m.put("exceptionCauseClass", text(h, KafkaHeaders.DLT_EXCEPTION_CAUSE_FQCN));
      m.put("exceptionMessage", text(h, KafkaHeaders.DLT_EXCEPTION_MESSAGE));
      m.put("stacktrace", text(h, KafkaHeaders.DLT_EXCEPTION_STACKTRACE));
      m.put("partitionBytes", partition == null ? null : partition.length);
      m.put("offsetBytes", offset == null ? null : offset.length);
      m.put("timestampBytes", ts == null ? null : ts.length);
      emit(m);
    }
  }

  /** A mapped header as the raw bytes Spring keeps for headers it has no type for. */
  static byte[] bytes(MessageHeaders h, String name) {
    Object v = h.get(name);
    if (v == null) return null;
    if (v instanceof byte[] b) return b;
    throw new IllegalStateException(name + " was mapped to " + v.getClass().getName() + ", not byte[]");
  }

  static String text(MessageHeaders h, String name) {
    byte[] b = bytes(h, name);
    return b == null ? null : new String(b, StandardCharsets.UTF_8);
  }
}
