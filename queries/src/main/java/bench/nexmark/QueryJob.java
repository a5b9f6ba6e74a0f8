package bench.nexmark;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.JobVertex;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Nexmark queries q1, q2, q3, q5, q8, q11 as Flink DataStream jobs (thesis ch. 5.4.2).
 *
 * <p>Every stage is one operator whose name and uid are the operator names of
 * {@code queries/topologies/*.yaml}; chaining is off and each operator has its own slot-sharing group
 * (named like the operator), so a stage is one job vertex and a one-slot task manager holds exactly one
 * subtask (operator-based scaling). Per-operator parallelism comes from {@code --parallelism}.
 *
 * <p>Arguments: {@code --query q1 --bootstrap HOST:PORT [--group-id G]
 * [--parallelism bids_source=2,map=1,sink=1] [--default-parallelism 1] [--max-parallelism 128]
 * [--from-earliest] [--job-name N] [--out-of-orderness-ms 1000] [--idle-timeout-ms 5000]
 * [--window-size-s 3600 --window-slide-s 60] (q5) [--session-gap-s 10] (q11) [--tumble-s 10] (q8)
 * [--state-ttl-s 300] (q3) [--checkpoint-interval-ms N] [--latency-max-window-ms 5000] [--print-plan] [--local]}.
 * {@code --local} runs the job in an in-process mini cluster with one slot per subtask (needs Flink's lib/
 * on the classpath).
 * {@code --print-plan} prints the job graph (one line per vertex: name, parallelism, vertex id) and exits
 * without running; it needs Flink on the classpath, not a cluster ({@code --query all} prints every query,
 * each line prefixed with the query).
 */
public final class QueryJob {
    /** Operator names per query, in topological order (must match queries/topologies/*.yaml). */
    public static final Map<String, List<String>> OPERATORS = new LinkedHashMap<>();

    static {
        OPERATORS.put("q1", List.of("bids_source", "map", "sink"));
        OPERATORS.put("q2", List.of("bids_source", "filter", "sink"));
        OPERATORS.put("q3", List.of("auction_source", "person_source", "person_filter", "join", "sink"));
        OPERATORS.put("q5", List.of("bids_source", "sliding_window", "sink"));
        OPERATORS.put("q8", List.of("person_source", "auction_source", "window_join", "sink"));
        OPERATORS.put("q11", List.of("bids_source", "session_window", "sink"));
    }

    /** Nexmark q1's exchange rate (dollars to euros). */
    static final double DOLLAR_TO_EURO = 0.908;
    /** Nexmark q2 keeps bids on auctions whose id is a multiple of this. */
    static final long Q2_AUCTION_MODULUS = 123;
    /** Nexmark q3: persons from these states, auctions of this category. */
    static final List<String> Q3_STATES = List.of("OR", "ID", "CA");
    static final long Q3_CATEGORY = 10;

    private final Args args;
    private final String query;
    private final StreamExecutionEnvironment env;
    private final Map<String, Integer> parallelism;

    QueryJob(Args args, StreamExecutionEnvironment env) {
        this.args = args;
        this.env = env;
        this.query = args.required("query");
        if (!OPERATORS.containsKey(query)) {
            throw new IllegalArgumentException("unknown query '" + query + "'; one of " + OPERATORS.keySet());
        }
        this.parallelism = Args.parseIntMap(args.get("parallelism", ""));
        for (String name : parallelism.keySet()) {
            if (!OPERATORS.get(query).contains(name)) {
                throw new IllegalArgumentException(
                        "--parallelism names unknown operator '" + name + "' for " + query + "; operators: "
                                + OPERATORS.get(query));
            }
        }
    }

    private int parallelismOf(String op) {
        int p = parallelism.getOrDefault(op, args.getInt("default-parallelism", 1));
        if (p < 1) {
            throw new IllegalArgumentException("parallelism of " + op + " must be >= 1, got " + p);
        }
        return p;
    }

    /** Names the operator, fixes its uid, parallelism and slot-sharing group (one per operator). */
    private <T> SingleOutputStreamOperator<T> stage(SingleOutputStreamOperator<T> s, String op) {
        return s.name(op).uid(op).setParallelism(parallelismOf(op)).slotSharingGroup(op);
    }

    private <T> DataStream<T> source(String op, String topic, KafkaRecordDeserializationSchema<T> deserializer) {
        OffsetsInitializer start = args.flag("from-earliest")
                ? OffsetsInitializer.earliest()
                : OffsetsInitializer.committedOffsets(OffsetResetStrategy.LATEST);
        String group = args.get("group-id", "bench-" + query);
        KafkaSource<T> source = KafkaSource.<T>builder()
                .setBootstrapServers(args.required("bootstrap"))
                .setTopics(topic)
                .setGroupId(group)
                .setClientIdPrefix(group + "-" + op)
                .setStartingOffsets(start)
                .setDeserializer(deserializer)
                .setProperty("partition.discovery.interval.ms", "30000")
                .setProperty("commit.offsets.on.checkpoint", "true")
                .build();
        // No timestamp assigner: the source uses the Kafka record timestamp, which is the event time.
        WatermarkStrategy<T> wm = WatermarkStrategy.<T>forBoundedOutOfOrderness(
                        Duration.ofMillis(args.getLong("out-of-orderness-ms", 1000)))
                .withIdleness(Duration.ofMillis(args.getLong("idle-timeout-ms", 5000)));
        return stage(env.fromSource(source, wm, op), op);
    }

    /**
     * The measuring, discarding sink: a terminal operator that records every record's end-to-end latency
     * ({@link Functions.LatencySink}) and drops it. Not a Flink Sink (those are renamed "Sink: sink" /
     * "sink: Writer" in the job graph), so its vertex is called exactly "sink". Its max gauge covers the
     * last {@code --latency-max-window-ms} (the harness passes its Prometheus scrape interval).
     */
    private <T> void sink(DataStream<T> in) {
        long window = args.getLong("latency-max-window-ms", 5000);
        if (window < 1) {
            throw new IllegalArgumentException("--latency-max-window-ms must be >= 1, got " + window);
        }
        stage(in.process(new Functions.LatencySink<T>(window)).returns(Types.VOID), "sink");
    }

    void build() {
        env.disableOperatorChaining();
        if (args.has("max-parallelism")) {
            env.setMaxParallelism(args.getInt("max-parallelism", 128));
        }
        if (args.has("checkpoint-interval-ms")) {
            env.enableCheckpointing(args.getLong("checkpoint-interval-ms", 10_000));
        }
        switch (query) {
            case "q1" -> q1();
            case "q2" -> q2();
            case "q3" -> q3();
            case "q5" -> q5();
            case "q8" -> q8();
            case "q11" -> q11();
            default -> throw new IllegalStateException(query);
        }
    }

    private void q1() {
        DataStream<Bid> bids = source("bids_source", "bids", CsvDeserializer.bids());
        sink(stage(bids.map(b -> new Bid(b.auction, b.bidder, Math.round(b.price * DOLLAR_TO_EURO), b.channel,
                b.url, b.dateTime)).returns(Bid.class), "map"));
    }

    private void q2() {
        DataStream<Bid> bids = source("bids_source", "bids", CsvDeserializer.bids());
        sink(stage(bids.filter(b -> b.auction % Q2_AUCTION_MODULUS == 0), "filter"));
    }

    private void q3() {
        DataStream<Auction> auctions = source("auction_source", "auctions", CsvDeserializer.auctions());
        DataStream<Person> persons = source("person_source", "persons", CsvDeserializer.persons());
        DataStream<Person> filtered = stage(persons.filter(p -> Q3_STATES.contains(p.state)), "person_filter");
        long ttlMs = args.getLong("state-ttl-s", 300) * 1000L;
        TypeInformation<Tuple4<String, String, String, Long>> out =
                Types.TUPLE(Types.STRING, Types.STRING, Types.STRING, Types.LONG);
        sink(stage(auctions.connect(filtered)
                .keyBy(a -> a.seller, p -> p.id, Types.LONG)
                .process(new Functions.IncrementalJoin(ttlMs, Q3_CATEGORY), out), "join"));
    }

    private void q5() {
        DataStream<Bid> bids = source("bids_source", "bids", CsvDeserializer.bids());
        Duration size = Duration.ofSeconds(args.getLong("window-size-s", 3600));
        Duration slide = Duration.ofSeconds(args.getLong("window-slide-s", 60));
        TypeInformation<Tuple3<Long, Long, Long>> out = Types.TUPLE(Types.LONG, Types.LONG, Types.LONG);
        sink(stage(bids.keyBy(b -> b.auction, Types.LONG)
                .window(SlidingEventTimeWindows.of(size, slide))
                .aggregate(new Functions.Count<>(), new Functions.AuctionCount(), Types.LONG, Types.LONG, out),
                "sliding_window"));
    }

    private void q8() {
        DataStream<Person> persons = source("person_source", "persons", CsvDeserializer.persons());
        DataStream<Auction> auctions = source("auction_source", "auctions", CsvDeserializer.auctions());
        long sizeMs = args.getLong("tumble-s", 10) * 1000L;
        TypeInformation<Tuple3<Long, String, Long>> out = Types.TUPLE(Types.LONG, Types.STRING, Types.LONG);
        sink(stage(persons.connect(auctions)
                .keyBy(p -> p.id, a -> a.seller, Types.LONG)
                .process(new Functions.WindowJoin(sizeMs), out), "window_join"));
    }

    private void q11() {
        DataStream<Bid> bids = source("bids_source", "bids", CsvDeserializer.bids());
        Duration gap = Duration.ofSeconds(args.getLong("session-gap-s", 10));
        TypeInformation<Tuple4<Long, Long, Long, Long>> out =
                Types.TUPLE(Types.LONG, Types.LONG, Types.LONG, Types.LONG);
        sink(stage(bids.keyBy(b -> b.bidder, Types.LONG)
                .window(EventTimeSessionWindows.withGap(gap))
                .aggregate(new Functions.Count<>(), new Functions.SessionCount(), Types.LONG, Types.LONG, out),
                "session_window"));
    }

    /** One line per job vertex: "vertex<TAB>name<TAB>parallelism<TAB>vertex id" (ids derive from the uids). */
    static void printPlan(JobGraph graph, String prefix) {
        for (JobVertex v : graph.getVerticesSortedTopologicallyFromSources()) {
            System.out.println(prefix + "vertex\t" + v.getName() + "\t" + v.getParallelism() + "\t" + v.getID());
        }
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        if ((args.flag("local") || args.flag("print-plan"))
                && System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            // run with plain `java -cp`: the shaded slf4j-simple binding logs, keep it to warnings
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        if (args.flag("print-plan") && "all".equals(args.get("query", ""))) {
            for (String q : OPERATORS.keySet()) {
                String[] withQuery = java.util.Arrays.copyOf(argv, argv.length + 2);
                withQuery[argv.length] = "--query";
                withQuery[argv.length + 1] = q;
                run(new Args(withQuery), q + "\t");
            }
            return;
        }
        run(args, "");
    }

    /** Slots the job needs: one per subtask, since every operator has its own slot-sharing group. */
    int slotsNeeded() {
        return OPERATORS.get(query).stream().mapToInt(this::parallelismOf).sum();
    }

    private static void run(Args args, String planPrefix) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        QueryJob job;
        try {
            if (args.flag("local")) {
                // an in-process mini cluster with one slot per subtask (tests, no Flink cluster needed)
                int slots = new QueryJob(args, env).slotsNeeded();
                Configuration conf = new Configuration();
                conf.set(TaskManagerOptions.NUM_TASK_SLOTS, slots);
                env = StreamExecutionEnvironment.createLocalEnvironment(conf);
            }
            job = new QueryJob(args, env);
            job.build();
        } catch (IllegalArgumentException e) {
            System.err.println("QueryJob: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (args.flag("print-plan")) {
            printPlan(env.getStreamGraph().getJobGraph(), planPrefix);
            return;
        }
        env.execute(args.get("job-name", "nexmark-" + job.query));
    }
}
