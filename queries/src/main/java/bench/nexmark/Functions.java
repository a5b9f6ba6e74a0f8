package bench.nexmark;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.api.java.tuple.Tuple4;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** The stateful operators of the Nexmark queries (the stateless ones are lambdas in {@link QueryJob}). */
final class Functions {
    private Functions() {}

    /**
     * The sink of every query: measures each record's end-to-end latency (processing time now minus the
     * record's event time, which is the Kafka timestamp the generator stamped, or a window's end for
     * window results) into a {@link LatencyHistogram}, then drops the record - the benchmark measures the
     * pipeline, not an external system.
     */
    static final class LatencySink<T> extends ProcessFunction<T, Void> {
        private final long maxWindowMs;
        private transient LatencyHistogram latency;

        LatencySink(long maxWindowMs) {
            this.maxWindowMs = maxWindowMs;
        }

        @Override
        public void open(OpenContext ctx) {
            latency = new LatencyHistogram(maxWindowMs);
            latency.register(getRuntimeContext().getMetricGroup());
        }

        @Override
        public void processElement(T value, Context ctx, Collector<Void> out) {
            Long eventTime = ctx.timestamp();
            if (eventTime != null) { // every source assigns the Kafka timestamp; no timestamp, no latency
                long now = System.currentTimeMillis();
                latency.record(now - eventTime, now);
            }
        }
    }

    /** Counts elements of a window; used by q5 (bids per auction) and q11 (bids per bidder session). */
    static final class Count<T> implements AggregateFunction<T, Long, Long> {
        @Override
        public Long createAccumulator() {
            return 0L;
        }

        @Override
        public Long add(T value, Long acc) {
            return acc + 1;
        }

        @Override
        public Long getResult(Long acc) {
            return acc;
        }

        @Override
        public Long merge(Long a, Long b) {
            return a + b;
        }
    }

    /** q5 output: (auction, bids in window, window end). */
    static final class AuctionCount extends ProcessWindowFunction<Long, Tuple3<Long, Long, Long>, Long, TimeWindow> {
        @Override
        public void process(Long auction, Context ctx, Iterable<Long> counts, Collector<Tuple3<Long, Long, Long>> out) {
            out.collect(Tuple3.of(auction, counts.iterator().next(), ctx.window().getEnd()));
        }
    }

    /** q11 output: (bidder, bids in session, session start, session end). */
    static final class SessionCount
            extends ProcessWindowFunction<Long, Tuple4<Long, Long, Long, Long>, Long, TimeWindow> {
        @Override
        public void process(Long bidder, Context ctx, Iterable<Long> counts,
                            Collector<Tuple4<Long, Long, Long, Long>> out) {
            out.collect(Tuple4.of(bidder, counts.iterator().next(), ctx.window().getStart(), ctx.window().getEnd()));
        }
    }

    /**
     * q3 incremental join (Nexmark q3): auctions of category 10 joined with persons (already filtered by
     * state) on seller = person id, keyed by that id. A person is remembered; auctions that arrive before
     * their seller wait in a list and are flushed when the person arrives. Both states expire after the
     * TTL (processing time, ~5 min in the thesis), which bounds the state as in the thesis' setup.
     */
    static final class IncrementalJoin
            extends KeyedCoProcessFunction<Long, Auction, Person, Tuple4<String, String, String, Long>> {
        private final long ttlMs;
        private final long category;
        private transient ValueState<Person> person;
        private transient ListState<Long> pendingAuctions;

        IncrementalJoin(long ttlMs, long category) {
            this.ttlMs = ttlMs;
            this.category = category;
        }

        @Override
        public void open(OpenContext ctx) {
            StateTtlConfig ttl = StateTtlConfig.newBuilder(Duration.ofMillis(ttlMs))
                    .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                    .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                    .build();
            ValueStateDescriptor<Person> p = new ValueStateDescriptor<>("person", Types.POJO(Person.class));
            p.enableTimeToLive(ttl);
            ListStateDescriptor<Long> a = new ListStateDescriptor<>("pending-auctions", Types.LONG);
            a.enableTimeToLive(ttl);
            person = getRuntimeContext().getState(p);
            pendingAuctions = getRuntimeContext().getListState(a);
        }

        @Override
        public void processElement1(Auction auction, Context ctx, Collector<Tuple4<String, String, String, Long>> out)
                throws Exception {
            if (auction.category != category) {
                return;
            }
            Person p = person.value();
            if (p != null) {
                out.collect(Tuple4.of(p.name, p.city, p.state, auction.id));
            } else {
                pendingAuctions.add(auction.id);
            }
        }

        @Override
        public void processElement2(Person p, Context ctx, Collector<Tuple4<String, String, String, Long>> out)
                throws Exception {
            person.update(p);
            Iterable<Long> pending = pendingAuctions.get();
            if (pending != null) {
                for (Long id : pending) {
                    out.collect(Tuple4.of(p.name, p.city, p.state, id));
                }
                pendingAuctions.clear();
            }
        }
    }

    /**
     * q8 tumbling-window join (Nexmark q8): persons and the auctions they opened in the same event-time
     * window, keyed by person id = seller. One operator (instead of DataStream#join, which adds tagging
     * map vertices) so the query keeps its four stages. Per key: the person and the auctions' reserves
     * per window start, emitted and cleared by an event-time timer at the window end.
     */
    static final class WindowJoin
            extends KeyedCoProcessFunction<Long, Person, Auction, Tuple3<Long, String, Long>> {
        private final long sizeMs;
        private transient MapState<Long, Person> persons;
        private transient MapState<Long, List<Long>> reserves;

        WindowJoin(long sizeMs) {
            this.sizeMs = sizeMs;
        }

        @Override
        public void open(OpenContext ctx) {
            persons = getRuntimeContext().getMapState(
                    new MapStateDescriptor<>("persons", Types.LONG, Types.POJO(Person.class)));
            reserves = getRuntimeContext().getMapState(
                    new MapStateDescriptor<>("reserves", Types.LONG, Types.LIST(Types.LONG)));
        }

        private long windowStart(long ts) {
            return ts - Math.floorMod(ts, sizeMs);
        }

        /** Registers the window's timer; false if the window has already fired (late record, dropped). */
        private boolean open(long start, Context ctx) {
            long fire = start + sizeMs - 1;
            if (fire <= ctx.timerService().currentWatermark()) {
                return false;
            }
            ctx.timerService().registerEventTimeTimer(fire);
            return true;
        }

        @Override
        public void processElement1(Person p, Context ctx, Collector<Tuple3<Long, String, Long>> out)
                throws Exception {
            long start = windowStart(ctx.timestamp());
            if (open(start, ctx)) {
                persons.put(start, p);
            }
        }

        @Override
        public void processElement2(Auction a, Context ctx, Collector<Tuple3<Long, String, Long>> out)
                throws Exception {
            long start = windowStart(ctx.timestamp());
            if (open(start, ctx)) {
                List<Long> list = reserves.get(start);
                if (list == null) {
                    list = new ArrayList<>();
                }
                list.add(a.reserve);
                reserves.put(start, list);
            }
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<Tuple3<Long, String, Long>> out)
                throws Exception {
            long start = timestamp + 1 - sizeMs;
            Person p = persons.get(start);
            List<Long> list = reserves.get(start);
            if (p != null && list != null) {
                for (Long reserve : list) {
                    out.collect(Tuple3.of(p.id, p.name, reserve));
                }
            }
            persons.remove(start);
            reserves.remove(start);
        }
    }
}
