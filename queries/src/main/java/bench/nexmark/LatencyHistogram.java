package bench.nexmark;

import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * End-to-end latency of the records a sink subtask receives, exported through Flink's metric system in
 * the shape of a Prometheus histogram, so that Prometheus computes exact per-interval statistics over
 * all subtasks of a sink: {@code histogram_quantile(q, sum by (le) (rate(..._le_bucket[w])))},
 * mean = rate(sumMs) / rate(count), and the interval's max from a windowed max gauge.
 *
 * <p>Why not a Flink {@code Histogram}: its Prometheus form is a summary over a reservoir of the last
 * records of one subtask, whose quantiles cannot be combined across subtasks or restricted to an
 * interval. Cumulative bucket counters can: their increase over any interval is that interval's
 * histogram, and buckets add up across subtasks and across restarts (a restarted subtask is a new series).
 *
 * <p>Series (Flink's Prometheus reporter; counters are exported as gauges, which {@code rate()} accepts):
 * <ul>
 *   <li>{@code flink_taskmanager_job_task_operator_latencyE2e_le_bucket{le="50",...}}: records with
 *       latency at most {@code le} milliseconds since the subtask started (cumulative, as Prometheus'
 *       {@code le}; the open bucket is {@code le="Inf"}). Milliseconds, not seconds: the reporter rewrites
 *       every character of a label value outside [a-zA-Z0-9:_] to '_', so "0.05" or "+Inf" would arrive as
 *       "0_05" and "_Inf"; whole milliseconds and "Inf" arrive intact and Prometheus parses both as numbers;
 *   <li>{@code ..._latencyE2e_count}, {@code ..._latencyE2e_sumMs}: records and their summed latency (ms);
 *   <li>{@code ..._latencyE2e_maxMs}: the largest latency of the last {@code maxWindowMs} (NaN when no
 *       record arrived): with the window set to the scrape interval every scrape sees the max since the
 *       previous one, and nobody else's reads reset it (a reset-on-read gauge would be stolen by any
 *       other reader of the endpoint).
 * </ul>
 *
 * <p>Bucket bounds: 63 upper bounds from 1 ms to 52.5 min, about ten per decade (preferred numbers
 * 1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8; whole milliseconds below 10 ms, where event times have
 * millisecond resolution), so linear interpolation inside a bucket is off by a few percent at most,
 * from a healthy pipeline's milliseconds to the minutes of a stalled one. Python keeps the same list
 * ({@code harness.metrics.latency.E2E_BUCKETS_MS}); {@code main} prints it for the test that checks this.
 *
 * <p>Written by the task thread only; the reporter thread reads through {@link AtomicLongArray}, so every
 * read sees a recent, untorn value. Monotonicity across buckets may lag by a record between two reads,
 * which Prometheus' {@code histogram_quantile} tolerates.
 */
final class LatencyHistogram {
    static final long[] BOUNDS_MS = {
        1, 2, 3, 4, 5, 6, 8,
        10, 12, 16, 20, 25, 31, 40, 50, 63, 80,
        100, 125, 160, 200, 250, 315, 400, 500, 630, 800,
        1_000, 1_250, 1_600, 2_000, 2_500, 3_150, 4_000, 5_000, 6_300, 8_000,
        10_000, 12_500, 16_000, 20_000, 25_000, 31_500, 40_000, 50_000, 63_000, 80_000,
        100_000, 125_000, 160_000, 200_000, 250_000, 315_000, 400_000, 500_000, 630_000, 800_000,
        1_000_000, 1_250_000, 1_600_000, 2_000_000, 2_500_000, 3_150_000,
    };
    private static final int SLOTS = 10;

    private final int buckets = BOUNDS_MS.length + 1; // the last one: above the largest bound (+Inf)
    // [0, buckets): records per bucket (not cumulative); then the record count and the latency sum (ms)
    private final AtomicLongArray counts = new AtomicLongArray(buckets + 2);
    private final int countIndex = buckets;
    private final int sumIndex = buckets + 1;
    private final long slotMs;
    private final AtomicLongArray slotId = new AtomicLongArray(SLOTS);
    private final AtomicLongArray slotMax = new AtomicLongArray(SLOTS);

    LatencyHistogram(long maxWindowMs) {
        this.slotMs = Math.max(1L, maxWindowMs / SLOTS);
        for (int i = 0; i < SLOTS; i++) {
            slotId.set(i, Long.MIN_VALUE);
        }
    }

    /** Index of the bucket holding `latencyMs` (the first bound >= it; the +Inf bucket above the last). */
    static int bucketOf(long latencyMs) {
        int lo = 0;
        int hi = BOUNDS_MS.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (BOUNDS_MS[mid] < latencyMs) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    void record(long latencyMs, long nowMs) {
        long lat = Math.max(0L, latencyMs); // event time stamped on the same host: never ahead, but be safe
        int b = bucketOf(lat);
        counts.lazySet(b, counts.get(b) + 1);
        counts.lazySet(countIndex, counts.get(countIndex) + 1);
        counts.lazySet(sumIndex, counts.get(sumIndex) + lat);
        long slot = nowMs / slotMs;
        int i = (int) Math.floorMod(slot, (long) SLOTS);
        if (slotId.get(i) != slot) {
            slotMax.set(i, lat);
            slotId.set(i, slot);
        } else if (lat > slotMax.get(i)) {
            slotMax.lazySet(i, lat);
        }
    }

    /** Records with latency at most BOUNDS_MS[upTo] (upTo = BOUNDS_MS.length: all of them). */
    long cumulative(int upTo) {
        long sum = 0;
        for (int i = 0; i <= upTo; i++) {
            sum += counts.get(i);
        }
        return sum;
    }

    long count() {
        return counts.get(countIndex);
    }

    long sumMs() {
        return counts.get(sumIndex);
    }

    /** Largest latency recorded in the last window (the current slot and the SLOTS - 1 before it); NaN if none. */
    double windowMaxMs(long nowMs) {
        long current = nowMs / slotMs;
        long max = -1;
        for (int i = 0; i < SLOTS; i++) {
            long id = slotId.get(i);
            if (id != Long.MIN_VALUE && id > current - SLOTS && id <= current) {
                max = Math.max(max, slotMax.get(i));
            }
        }
        return max < 0 ? Double.NaN : (double) max;
    }

    /** Prometheus' {@code le} label for a bound: whole milliseconds ("1", "125", "3150000"). */
    static String label(long boundMs) {
        return Long.toString(boundMs);
    }

    /** Registers the histogram's series under {@code <group>.latencyE2e} (see the class comment). */
    void register(MetricGroup operatorGroup) {
        MetricGroup group = operatorGroup.addGroup("latencyE2e");
        for (int i = 0; i <= BOUNDS_MS.length; i++) {
            String le = i < BOUNDS_MS.length ? label(BOUNDS_MS[i]) : "Inf";
            group.addGroup("le", le).counter("bucket", new Cumulative(this, i));
        }
        group.counter("count", new Cumulative(this, -1));
        group.counter("sumMs", new Cumulative(this, -2));
        group.gauge("maxMs", (Gauge<Double>) () -> windowMaxMs(System.currentTimeMillis()));
    }

    /** A read-only view of one cumulative count as a Flink counter (the histogram itself does the counting). */
    private static final class Cumulative implements Counter {
        private final LatencyHistogram h;
        private final int which; // bucket index, -1 = count, -2 = sum

        Cumulative(LatencyHistogram h, int which) {
            this.h = h;
            this.which = which;
        }

        @Override
        public void inc() {
            throw new UnsupportedOperationException("read-only view of the latency histogram");
        }

        @Override
        public void inc(long n) {
            throw new UnsupportedOperationException("read-only view of the latency histogram");
        }

        @Override
        public void dec() {
            throw new UnsupportedOperationException("read-only view of the latency histogram");
        }

        @Override
        public void dec(long n) {
            throw new UnsupportedOperationException("read-only view of the latency histogram");
        }

        @Override
        public long getCount() {
            return which == -1 ? h.count() : which == -2 ? h.sumMs() : h.cumulative(which);
        }
    }

    /** Prints the bucket bounds in ms, one per line (the Python side's copy is checked against this). */
    public static void main(String[] args) {
        for (long b : BOUNDS_MS) {
            System.out.println(b);
        }
    }
}
