package io.tidemark.bench;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The Kafka Streams side of tidemark's side-by-side benchmark. Each workload
 * mirrors one of tidemark's (bench package): same input topics, same output
 * shape, keys and values as UTF-8 strings, counts as decimal strings.
 *
 * <pre>
 * Main --bootstrap HOST:PORT --app-id ID
 *      --workload stateless|count|windowed|join|stream-join|stream-left-join|stream-outer-join|session|table-agg|table-left-join|latest|sweep
 *      --input TOPIC --output TOPIC [--table TOPIC] [--window-output TOPIC] [--commit-interval-ms N]
 *      [--report-commits-ms N]
 *      [--window-ms N] [--grace-ms N] [--state-dir DIR] [--threads N] [--cache-bytes N]
 *      [--instance-id NAME] [--standby-replicas N] [--session-timeout-ms N] [--heartbeat-interval-ms N]
 * </pre>
 *
 * It prints "READY" once the application reaches RUNNING, and exits on
 * SIGTERM after closing the application. The sweep workload (bench sweep) is
 * count into --output and the windowed count into --window-output, both from
 * the one input; with --report-commits-ms it prints
 * "COMMITS &lt;commit-total&gt; &lt;commit-latency-avg ms&gt;" that often, summed
 * (latency averaged) over the stream threads' metrics.
 */
public final class Main {
    public static void main(String[] argv) throws Exception {
        Map<String, String> a = parse(argv);
        String workload = need(a, "workload");
        String input = need(a, "input");
        String output = need(a, "output");

        StreamsBuilder b = new StreamsBuilder();
        // table-agg reads its input as a table, and a topic has one source.
        KStream<String, String> in = workload.equals("table-agg") ? null
            : b.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        switch (workload) {
            case "stateless" -> in
                .filter((k, v) -> v != null && !v.startsWith("#"))
                .mapValues(v -> v.toUpperCase())
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "count" -> in
                .groupByKey()
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .mapValues(Object::toString)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "windowed" -> windowed(in, a, output);
            case "sweep" -> {
                in.groupByKey()
                    .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                    .toStream()
                    .mapValues(Object::toString)
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
                windowed(in, a, need(a, "window-output"));
            }
            case "latest" -> in
                // The failover measurement's table: the latest value of every key.
                .groupByKey()
                .reduce((agg, v) -> v, Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("latest"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "join" -> {
                KTable<String, String> table = b.table(need(a, "table"),
                    Consumed.with(Serdes.String(), Serdes.String()),
                    Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("inventory"));
                in.join(table, (payment, stock) -> payment + "|" + stock)
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "stream-join" -> {
                // bench parity's stream-stream inner join: --input and
                // --table are two streams, joined within ±window-ms with grace-ms.
                KStream<String, String> other = b.stream(need(a, "table"), Consumed.with(Serdes.String(), Serdes.String()));
                in.join(other, (left, right) -> left + "|" + right,
                        JoinWindows.ofTimeDifferenceAndGrace(
                            Duration.ofMillis(Long.parseLong(a.getOrDefault("window-ms", "1000"))),
                            Duration.ofMillis(Long.parseLong(a.getOrDefault("grace-ms", "500")))),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "table-left-join" -> {
                // bench parity's stream-table left join: --table is the table.
                KTable<String, String> rows = b.table(need(a, "table"),
                    Consumed.with(Serdes.String(), Serdes.String()),
                    Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("rows"));
                in.leftJoin(rows, (v, row) -> v + "|" + row)
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "stream-left-join" -> {
                // bench parity's left join: as stream-join, and each left
                // record no right record joined as "L|null" once its window closes.
                KStream<String, String> other = b.stream(need(a, "table"), Consumed.with(Serdes.String(), Serdes.String()));
                in.leftJoin(other, (left, right) -> left + "|" + right, joinWindows(a),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "stream-outer-join" -> {
                // bench parity's outer join: unjoined records of either side
                // as "L|null" / "null|R" once their window closes.
                KStream<String, String> other = b.stream(need(a, "table"), Consumed.with(Serdes.String(), Serdes.String()));
                in.outerJoin(other, (left, right) -> left + "|" + right, joinWindows(a),
                        StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String()))
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
            }
            case "session" -> in
                // bench parity's session count: the final count of every
                // session (gap window-ms, grace grace-ms) as
                // "<key>@<start>@<end>"; suppression drops the tombstones
                // of sessions a merge replaced.
                .groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                    Duration.ofMillis(Long.parseLong(a.getOrDefault("window-ms", "500"))),
                    Duration.ofMillis(Long.parseLong(a.getOrDefault("grace-ms", "500")))))
                .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("session-counts"))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                .toStream()
                .map((wk, count) -> new org.apache.kafka.streams.KeyValue<>(
                    wk.key() + "@" + wk.window().start() + "@" + wk.window().end(),
                    count == null ? null : count.toString()))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
            case "table-agg" -> b
                // bench parity's table aggregation: the input as a table,
                // re-keyed by category ("c" and the value's last two
                // characters) and counted; a row that changes category is
                // subtracted from its old one.
                .table(input, Consumed.with(Serdes.String(), Serdes.String()),
                    Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("rows"))
                .groupBy((k, v) -> new org.apache.kafka.streams.KeyValue<>("c" + v.substring(Math.max(0, v.length() - 2)), k),
                    Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("category-counts"))
                .toStream()
                .mapValues(Object::toString)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
            default -> throw new IllegalArgumentException("unknown --workload " + workload
                + " (want stateless, count, windowed, join, stream-join, stream-left-join, stream-outer-join, session, table-agg, table-left-join, latest or sweep)");
        }

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, need(a, "app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, need(a, "bootstrap"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(a.getOrDefault("threads", "1")));
        p.put(StreamsConfig.STATE_DIR_CONFIG, a.getOrDefault("state-dir", "/tmp/tidemark-bench-kstreams"));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        if (a.containsKey("commit-interval-ms")) {
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(a.get("commit-interval-ms")));
        }
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (a.containsKey("instance-id")) {
            // Static membership (KIP-345): Streams appends "-<thread>"; the
            // failover harness finds partition owners by this name.
            p.put(StreamsConfig.mainConsumerPrefix("group.instance.id"), a.get("instance-id"));
        }
        if (a.containsKey("standby-replicas")) {
            p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.parseInt(a.get("standby-replicas")));
        }
        if (a.containsKey("session-timeout-ms")) {
            p.put(StreamsConfig.mainConsumerPrefix("session.timeout.ms"), Integer.parseInt(a.get("session-timeout-ms")));
        }
        if (a.containsKey("heartbeat-interval-ms")) {
            p.put(StreamsConfig.mainConsumerPrefix("heartbeat.interval.ms"), Integer.parseInt(a.get("heartbeat-interval-ms")));
        }
        // Emit the null-padded results of left and outer joins on every
        // record that advances stream time instead of at most once a
        // second of wall-clock time (the internal default, 1000 ms): with
        // the throttle, whether a late record still joins a record whose
        // window has closed depends on when the last emission ran, not on
        // the input, and parity compares inputs, not timing.
        p.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
        if (a.containsKey("cache-bytes")) {
            // 0 turns off the record cache: every update is emitted, as tidemark does.
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(a.get("cache-bytes")));
        }

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("READY");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        // Finished restores, for the failover measurement ("RESTORED <task> <store> <records>").
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                System.out.println("RESTORED " + tp + " " + store + " " + total);
                System.out.flush();
            }
        });
        streams.start();
        if (a.containsKey("report-commits-ms")) {
            reportCommits(streams, Long.parseLong(a.get("report-commits-ms")));
        }
        done.await();
    }

    private static JoinWindows joinWindows(Map<String, String> a) {
        return JoinWindows.ofTimeDifferenceAndGrace(
            Duration.ofMillis(Long.parseLong(a.getOrDefault("window-ms", "1000"))),
            Duration.ofMillis(Long.parseLong(a.getOrDefault("grace-ms", "500"))));
    }

    private static void windowed(KStream<String, String> in, Map<String, String> a, String output) {
        long size = Long.parseLong(a.getOrDefault("window-ms", "10000"));
        long grace = Long.parseLong(a.getOrDefault("grace-ms", "1000"));
        in.groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
            .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("window-counts"))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .map((wk, count) -> new org.apache.kafka.streams.KeyValue<>(
                wk.key() + "@" + wk.window().start(), count.toString()))
            .to(output, Produced.with(Serdes.String(), Serdes.String()));
    }

    /** Prints the stream threads' commit count and mean commit latency every periodMs. */
    private static void reportCommits(KafkaStreams streams, long periodMs) {
        Thread t = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(periodMs);
                } catch (InterruptedException e) {
                    return;
                }
                double total = 0, latency = 0;
                int threads = 0;
                for (var e : streams.metrics().entrySet()) {
                    var n = e.getKey();
                    if (!n.group().equals("stream-thread-metrics")) {
                        continue;
                    }
                    Object v = e.getValue().metricValue();
                    if (!(v instanceof Number num) || Double.isNaN(num.doubleValue())) {
                        continue;
                    }
                    if (n.name().equals("commit-total")) {
                        total += num.doubleValue();
                    } else if (n.name().equals("commit-latency-avg")) {
                        latency += num.doubleValue();
                        threads++;
                    }
                }
                System.out.println("COMMITS " + (long) total + " " + (threads > 0 ? latency / threads : 0));
                System.out.flush();
            }
        }, "commit-reporter");
        t.setDaemon(true);
        t.start();
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
            }
            m.put(argv[i].substring(2), argv[++i]);
        }
        return m;
    }

    private static String need(Map<String, String> a, String key) {
        String v = a.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return v;
    }
}
