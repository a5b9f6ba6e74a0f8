package bench.nexmark;

import com.sun.net.httpserver.HttpServer;

import org.apache.kafka.clients.admin.AdminClient;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStream;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * Nexmark load generator: produces Person/Auction/Bid CSV records (see {@link Bid}, {@link Person},
 * {@link Auction}) into Kafka, following a per-second rate schedule, with several producer threads.
 *
 * <p>The schedule file holds one number per line: the target records/s for that step of the run,
 * summed over the topics produced (blank lines and lines starting with '#' are skipped). A step is one
 * second unless {@code --step-ms} says otherwise: bursty or Poisson arrivals (workloads/arrivals.py)
 * are written as per-100 ms counts, so the pacing follows the drawn process below the second. With
 * {@code --topics bids} every record is a bid; with {@code --topics persons,auctions} persons and
 * auctions keep their Nexmark 1:3 ratio. Each producer thread owns a disjoint slice of the event
 * numbers and paces itself to its share of the cumulative target, so the produced count follows the
 * schedule's integral; when the brokers cannot keep up it falls at most {@code --max-backlog-s}
 * seconds behind and then skips (counted in {@code generator_records_skipped_total}).
 *
 * <p>With {@code --timestamps-out} each record is sampled independently with probability
 * 1/{@code --timestamps-every} (geometric skips, one random draw per sample), so the file is a thinned
 * copy of the send process, whose gaps keep the process' kind (MEAD's inter-arrival input); each
 * thread flushes its samples at least once a second.
 *
 * <p>Every record carries its event time (wall clock at creation, epoch ms) both in the CSV and as the
 * Kafka record timestamp, so the time a record spent in Kafka before Flink read it is measurable.
 *
 * <p>Usage: {@code java -cp nexmark-queries.jar bench.nexmark.Generator --bootstrap 127.0.0.1:9092
 * --topics bids (--schedule rates.txt [--step-ms 1000] | --rate 50000 --duration 30) [--producers 2]
 * [--metrics-port 9400] [--timestamps-out ts.csv --timestamps-every 10] [--create-topics --partitions 24]
 * [--exit-when-done] [--summary-out summary.json] [--seed 1] [--no-kafka]}. {@code --no-kafka} generates
 * and counts records without sending them (to measure the generator's own cost).
 */
public final class Generator {
    private final Map<String, LongAdder> sent = new LinkedHashMap<>();
    private final Map<String, LongAdder> acked = new LinkedHashMap<>();
    private final LongAdder errors = new LongAdder();
    private final LongAdder skipped = new LongAdder();
    private volatile double targetRate;
    private volatile long schedulePosition;
    private volatile boolean done;
    private volatile boolean stop;
    private volatile long startNanos;
    private volatile Throwable failure;
    private final CountDownLatch ready;
    private final CountDownLatch go = new CountDownLatch(1);

    private final Args args;
    private final double[] rates; // records/s per step
    private final double stepS;
    private final double durationS;
    private final double[] cumulative; // records at the start of each step
    private final int[] offsets;
    private final int producers;
    private final double maxBacklogS;
    private final int timestampsEvery;
    private final Writer timestampsOut;
    private final List<Thread> threads = new ArrayList<>();

    Generator(Args args) throws IOException {
        this.args = args;
        this.rates = loadSchedule(args);
        this.stepS = args.has("schedule") ? args.getInt("step-ms", 1000) / 1000.0 : 1.0;
        if (stepS <= 0) {
            throw new IllegalArgumentException("--step-ms must be > 0");
        }
        this.durationS = rates.length * stepS;
        this.cumulative = new double[rates.length + 1];
        for (int i = 0; i < rates.length; i++) {
            cumulative[i + 1] = cumulative[i] + rates[i] * stepS;
        }
        Set<EventFactory.Kind> kinds = parseTopics(args.get("topics", "bids"));
        List<Integer> allowed = new ArrayList<>();
        for (int off = 0; off < EventFactory.PROPORTION_DENOMINATOR; off++) {
            if (kinds.contains(EventFactory.kindOf(off))) {
                allowed.add(off);
            }
        }
        this.offsets = allowed.stream().mapToInt(Integer::intValue).toArray();
        for (EventFactory.Kind k : kinds) {
            sent.put(EventFactory.topicOf(k), new LongAdder());
            acked.put(EventFactory.topicOf(k), new LongAdder());
        }
        this.producers = args.getInt("producers", 2);
        if (producers < 1) {
            throw new IllegalArgumentException("--producers must be >= 1");
        }
        this.ready = new CountDownLatch(producers);
        this.maxBacklogS = args.getDouble("max-backlog-s", 1.0);
        this.timestampsEvery = Math.max(1, args.getInt("timestamps-every", 10));
        String ts = args.get("timestamps-out", null);
        if (ts != null) {
            BufferedWriter w = Files.newBufferedWriter(Path.of(ts), StandardCharsets.UTF_8);
            w.write("t_us,topic,producer\n");
            this.timestampsOut = w;
        } else {
            this.timestampsOut = null;
        }
    }

    static Set<EventFactory.Kind> parseTopics(String spec) {
        Set<EventFactory.Kind> kinds = EnumSet.noneOf(EventFactory.Kind.class);
        for (String t : spec.split(",")) {
            switch (t.trim()) {
                case "bids" -> kinds.add(EventFactory.Kind.BID);
                case "auctions" -> kinds.add(EventFactory.Kind.AUCTION);
                case "persons" -> kinds.add(EventFactory.Kind.PERSON);
                case "all" -> kinds.addAll(EnumSet.allOf(EventFactory.Kind.class));
                default -> throw new IllegalArgumentException("unknown topic '" + t + "' (bids, auctions, persons)");
            }
        }
        return kinds;
    }

    static double[] loadSchedule(Args args) throws IOException {
        if (args.has("schedule")) {
            List<Double> out = new ArrayList<>();
            for (String line : Files.readAllLines(Path.of(args.get("schedule", null)))) {
                String s = line.trim();
                if (s.isEmpty() || s.startsWith("#")) {
                    continue;
                }
                double r = Double.parseDouble(s);
                if (r < 0 || Double.isNaN(r)) {
                    throw new IllegalArgumentException("negative or NaN rate in schedule: " + s);
                }
                out.add(r);
            }
            return out.stream().mapToDouble(Double::doubleValue).toArray();
        }
        if (args.has("rate")) {
            double[] r = new double[args.getInt("duration", 60)];
            java.util.Arrays.fill(r, args.getDouble("rate", 0));
            return r;
        }
        throw new IllegalArgumentException("give --schedule FILE or --rate R [--duration S]");
    }

    /** Records the whole generator should have produced after {@code elapsedS} seconds. */
    double targetCount(double elapsedS) {
        int s = (int) Math.floor(elapsedS / stepS);
        if (s >= rates.length) {
            return cumulative[rates.length];
        }
        return cumulative[s] + rates[s] * (elapsedS - s * stepS);
    }

    /** Scheduled records/s at {@code elapsedS} (0 after the end). */
    double rateAt(double elapsedS) {
        int s = (int) Math.floor(elapsedS / stepS);
        return s < rates.length && s >= 0 ? rates[s] : 0.0;
    }

    private Properties producerProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.required("bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, args.get("acks", "1"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, args.get("linger-ms", "5"));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, args.get("batch-size", "262144"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args.get("compression", "lz4"));
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, args.get("buffer-memory", "67108864"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "nexmark-generator");
        return p;
    }

    private void createTopics() throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.required("bootstrap"));
        try (AdminClient admin = AdminClient.create(p)) {
            Set<String> existing = admin.listTopics().names().get();
            List<NewTopic> missing = new ArrayList<>();
            for (String t : sent.keySet()) {
                if (!existing.contains(t)) {
                    missing.add(new NewTopic(t, args.getInt("partitions", 24), (short) args.getInt("replication", 1)));
                }
            }
            if (!missing.isEmpty()) {
                admin.createTopics(missing).all().get();
            }
        }
    }

    private final class Producer implements Runnable {
        private final int index;

        Producer(int index) {
            this.index = index;
        }

        @Override
        public void run() {
            EventFactory factory = new EventFactory(args.getLong("seed", 1) * 1_000_003L + index);
            double share = 1.0 / producers;
            Map<String, LongAdder> sentByTopic = sent;
            Map<String, Callback> callbacks = new LinkedHashMap<>();
            for (String t : acked.keySet()) {
                LongAdder ok = acked.get(t);
                callbacks.put(t, (md, ex) -> {
                    if (ex == null) {
                        ok.increment();
                    } else {
                        errors.increment();
                    }
                });
            }
            StringBuilder tsBuf = timestampsOut != null ? new StringBuilder(1 << 16) : null;
            // Threads take whole blocks of Nexmark events in turn (block b*producers + index is this thread's
            // b-th), so event numbers are disjoint and each thread alone keeps the 1:3:46 proportions even
            // when the threads' throughputs differ.
            long seq = 0;
            double paced = 0; // records produced or skipped by this thread
            long count = 0;
            java.util.SplittableRandom sampler = new java.util.SplittableRandom(args.getLong("seed", 1) * 7919L + index);
            double logKeep = Math.log1p(-1.0 / timestampsEvery); // -inf when every record is sampled
            long nextSample = nextSampleAfter(0, sampler, logKeep);
            long lastFlush = 0;
            boolean noKafka = args.flag("no-kafka");
            try (KafkaProducer<byte[], byte[]> producer = noKafka ? null : new KafkaProducer<>(producerProps())) {
                // Get ready before the schedule's clock starts: fetch the topics' metadata (the first
                // send would block on it) and warm the record encoder up.
                if (producer != null) {
                    for (String t : acked.keySet()) {
                        producer.partitionsFor(t);
                    }
                }
                long sink = 0;
                for (int i = 0; i < 20_000; i++) {
                    sink += factory.encode(i, 0L).length;
                }
                if (sink == 0) {
                    throw new IllegalStateException("encoder produced nothing");
                }
                ready.countDown();
                go.await();
                long startEpochUs = System.currentTimeMillis() * 1000L;
                while (!stop) {
                    long now = System.nanoTime();
                    double elapsed = (now - startNanos) / 1e9;
                    boolean end = elapsed >= durationS;
                    if (end) {
                        elapsed = durationS; // finish the schedule's last records, then stop
                    }
                    double rate = rates.length == 0 ? 0.0
                            : rates[Math.min((int) (elapsed / stepS), rates.length - 1)];
                    if (tsBuf != null && tsBuf.length() > 0 && now - lastFlush > 1_000_000_000L) {
                        flushTimestamps(tsBuf); // keep the file at most ~1 s behind for live readers
                        lastFlush = now;
                    }
                    double want = targetCount(elapsed) * share;
                    double behind = want - paced;
                    double allowed = Math.max(1.0, maxBacklogS * rate * share);
                    if (behind > allowed) {
                        long skip = (long) (behind - allowed);
                        skipped.add(skip);
                        paced += skip;
                        behind -= skip;
                    }
                    if (behind < 1.0) {
                        if (end) {
                            break;
                        }
                        double perThread = rate * share;
                        long waitNs = perThread > 0 ? (long) ((1.0 - behind) / perThread * 1e9) : 1_000_000L;
                        LockSupport.parkNanos(Math.max(100_000L, Math.min(waitNs, 1_000_000L)));
                        continue;
                    }
                    int batch = (int) Math.min(behind, 2000);
                    for (int b = 0; b < batch; b++) {
                        int m = offsets.length;
                        long block = (seq / m) * producers + index;
                        long eventNumber = block * EventFactory.PROPORTION_DENOMINATOR + offsets[(int) (seq % m)];
                        seq++;
                        long ts = System.currentTimeMillis();
                        String topic = EventFactory.topicOf(EventFactory.kindOf(eventNumber));
                        byte[] value = factory.encode(eventNumber, ts);
                        if (producer != null) {
                            producer.send(new ProducerRecord<>(topic, null, ts, null, value), callbacks.get(topic));
                        } else if (value.length > 0) {
                            acked.get(topic).increment(); // --no-kafka: measures generation alone
                        }
                        sentByTopic.get(topic).increment();
                        count++;
                        if (tsBuf != null && count == nextSample) {
                            nextSample = nextSampleAfter(count, sampler, logKeep);
                            long tUs = startEpochUs + (System.nanoTime() - startNanos) / 1000L;
                            tsBuf.append(tUs).append(',').append(topic).append(',').append(index).append('\n');
                            if (tsBuf.length() > 60_000) {
                                flushTimestamps(tsBuf);
                            }
                        }
                    }
                    paced += batch;
                }
                if (producer != null) {
                    producer.flush();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                failure = e;
                ready.countDown();
                System.err.println("generator: producer-" + index + " failed: " + e);
            } finally {
                if (tsBuf != null) {
                    flushTimestamps(tsBuf);
                }
            }
        }
    }

    /** Index of the next sampled record: a Bernoulli(1/every) thinning drawn as a geometric skip. */
    static long nextSampleAfter(long count, java.util.SplittableRandom rng, double logKeep) {
        if (Double.isInfinite(logKeep)) {
            return count + 1;
        }
        double u = 1.0 - rng.nextDouble(); // (0, 1]
        return count + 1 + (long) Math.floor(Math.log(u) / logKeep);
    }

    private void flushTimestamps(StringBuilder buf) {
        synchronized (timestampsOut) {
            try {
                timestampsOut.write(buf.toString());
            } catch (IOException e) {
                System.err.println("generator: cannot write timestamps: " + e);
            }
        }
        buf.setLength(0);
    }

    String metricsText() {
        StringBuilder sb = new StringBuilder(1024);
        sb.append("# HELP generator_records_produced_total Records acknowledged by Kafka, per topic.\n");
        sb.append("# TYPE generator_records_produced_total counter\n");
        acked.forEach((t, v) -> sb.append("generator_records_produced_total{topic=\"").append(t).append("\"} ")
                .append(v.sum()).append('\n'));
        sb.append("# HELP generator_records_sent_total Records handed to the Kafka producer, per topic.\n");
        sb.append("# TYPE generator_records_sent_total counter\n");
        sent.forEach((t, v) -> sb.append("generator_records_sent_total{topic=\"").append(t).append("\"} ")
                .append(v.sum()).append('\n'));
        sb.append("# HELP generator_send_errors_total Records Kafka rejected.\n");
        sb.append("# TYPE generator_send_errors_total counter\n");
        sb.append("generator_send_errors_total ").append(errors.sum()).append('\n');
        sb.append("# HELP generator_records_skipped_total Records dropped because the generator fell behind.\n");
        sb.append("# TYPE generator_records_skipped_total counter\n");
        sb.append("generator_records_skipped_total ").append(skipped.sum()).append('\n');
        sb.append("# HELP generator_target_rate Scheduled records/s for the current second (all topics).\n");
        sb.append("# TYPE generator_target_rate gauge\n");
        sb.append("generator_target_rate ").append(String.format(Locale.ROOT, "%.3f", targetRate)).append('\n');
        sb.append("# HELP generator_schedule_position_seconds Seconds of the schedule played so far.\n");
        sb.append("# TYPE generator_schedule_position_seconds gauge\n");
        sb.append("generator_schedule_position_seconds ").append(schedulePosition).append('\n');
        sb.append("# HELP generator_schedule_seconds Length of the schedule.\n");
        sb.append("# TYPE generator_schedule_seconds gauge\n");
        sb.append("generator_schedule_seconds ").append(String.format(Locale.ROOT, "%.3f", durationS)).append('\n');
        sb.append("# HELP generator_done 1 once the schedule has been played and the producers flushed.\n");
        sb.append("# TYPE generator_done gauge\n");
        sb.append("generator_done ").append(done ? 1 : 0).append('\n');
        return sb.toString();
    }

    String summaryJson() {
        StringBuilder sb = new StringBuilder("{\"produced\": {");
        String sep = "";
        for (Map.Entry<String, LongAdder> e : acked.entrySet()) {
            sb.append(sep).append('"').append(e.getKey()).append("\": ").append(e.getValue().sum());
            sep = ", ";
        }
        double elapsed = startNanos == 0 ? 0 : (System.nanoTime() - startNanos) / 1e9;
        sb.append("}, \"errors\": ").append(errors.sum()).append(", \"skipped\": ").append(skipped.sum())
                .append(", \"elapsed_s\": ").append(String.format(Locale.ROOT, "%.3f", elapsed))
                .append(", \"schedule_s\": ").append(String.format(Locale.ROOT, "%.3f", durationS)).append('}');
        return sb.toString();
    }

    private HttpServer startMetricsServer(int port) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress(args.get("metrics-host", "127.0.0.1"), port), 0);
        server.createContext("/metrics", exchange -> {
            byte[] body = metricsText().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream os = exchange.getResponseBody()) {
                os.write(body);
            }
        });
        server.start();
        return server;
    }

    private long totalAcked() {
        return acked.values().stream().mapToLong(LongAdder::sum).sum();
    }

    void run() throws Exception {
        if (args.flag("create-topics")) {
            createTopics();
        }
        Runtime.getRuntime().addShutdownHook(new Thread(this::shutdown, "generator-shutdown"));
        for (int i = 0; i < producers; i++) {
            Thread t = new Thread(new Producer(i), "producer-" + i);
            threads.add(t);
            t.start();
        }
        if (!ready.await(args.getLong("ready-timeout-s", 120), TimeUnit.SECONDS) || failure != null) {
            throw new IllegalStateException("producers not ready (Kafka at " + args.required("bootstrap")
                    + " unreachable or topics missing?)" + (failure != null ? ": " + failure : ""));
        }
        // The schedule starts now; the metrics endpoint comes up with it, so a caller that waits for the
        // endpoint knows second 0 has begun.
        startNanos = System.nanoTime();
        go.countDown();
        int port = args.getInt("metrics-port", 0);
        HttpServer server = port > 0 ? startMetricsServer(port) : null;
        long logEveryS = args.getLong("log-every-s", 10);
        long lastLog = startNanos;
        long lastCount = 0;
        while (threads.stream().anyMatch(Thread::isAlive)) {
            double elapsed = (System.nanoTime() - startNanos) / 1e9;
            schedulePosition = (long) Math.min(elapsed, durationS);
            targetRate = rateAt(elapsed);
            long now = System.nanoTime();
            if (logEveryS > 0 && now - lastLog >= logEveryS * 1_000_000_000L) {
                long c = totalAcked();
                System.err.printf(Locale.ROOT, "generator: t=%.0fs target=%.0f/s produced=%.0f/s total=%d skipped=%d%n",
                        elapsed, targetRate, (c - lastCount) / ((now - lastLog) / 1e9), c, skipped.sum());
                lastLog = now;
                lastCount = c;
            }
            Thread.sleep(100);
        }
        schedulePosition = (long) Math.ceil(durationS);
        targetRate = 0.0;
        done = true;
        if (timestampsOut != null) {
            synchronized (timestampsOut) {
                timestampsOut.flush();
            }
        }
        System.out.println(summaryJson());
        writeSummary();
        if (args.flag("exit-when-done")) {
            if (server != null) {
                server.stop(0);
            }
            return;
        }
        while (true) {
            Thread.sleep(1000); // keep serving final counts until the harness stops us
        }
    }

    private void writeSummary() {
        String path = args.get("summary-out", null);
        if (path == null) {
            return;
        }
        try {
            Files.writeString(Path.of(path), summaryJson() + "\n");
        } catch (IOException e) {
            System.err.println("generator: cannot write summary: " + e);
        }
    }

    private void shutdown() {
        if (done) {
            return;
        }
        stop = true;
        go.countDown();
        for (Thread t : threads) {
            try {
                t.join(Duration.ofSeconds(10).toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        try {
            if (timestampsOut != null) {
                synchronized (timestampsOut) {
                    timestampsOut.close();
                }
            }
        } catch (IOException e) {
            System.err.println("generator: " + e);
        }
        writeSummary();
    }

    public static void main(String[] argv) throws Exception {
        // Kafka clients log their whole config at INFO; keep warnings and errors only (slf4j-simple).
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        Generator g;
        try {
            g = new Generator(new Args(argv));
            g.args.required("bootstrap");
        } catch (IllegalArgumentException e) {
            System.err.println("generator: " + e.getMessage());
            System.exit(2);
            return;
        }
        try {
            g.run();
        } catch (IllegalStateException e) {
            System.err.println("generator: " + e.getMessage());
            System.exit(1);
        }
        System.exit(g.failure != null ? 1 : 0);
    }
}
