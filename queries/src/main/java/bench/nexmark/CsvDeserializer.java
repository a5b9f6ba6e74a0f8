package bench.nexmark;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;

import java.nio.charset.StandardCharsets;

/**
 * Parses the generator's CSV records and measures event-time lag per source subtask.
 *
 * <p>Registered on the source reader's metric group (the Kafka connector nests it under a
 * {@code deserializer} group, so Prometheus sees e.g.
 * {@code flink_taskmanager_job_task_operator_deserializer_eventTimeLag{operator_name="bids_source",...}}):
 * <ul>
 *   <li>{@code eventTimeLag}: now minus the event time of the last record this subtask emitted, ms
 *       (grows while the subtask receives nothing: time since the newest data it has seen);</li>
 *   <li>{@code recordLag}: emit time minus event time of that last record, ms (time it spent in Kafka and
 *       the fetcher; frozen when idle);</li>
 *   <li>{@code malformedRecords}: records that could not be parsed and were dropped.</li>
 *   <li>both lags are NaN until the subtask has emitted its first record since it (re)started.</li>
 * </ul>
 * The record's event time is the Kafka record timestamp, which the generator sets to the CSV dateTime.
 */
public final class CsvDeserializer<T> implements KafkaRecordDeserializationSchema<T> {
    private static final long serialVersionUID = 1L;

    public enum Format { BID, PERSON, AUCTION }

    private final Format format;
    private final Class<T> type;
    private transient volatile long lastEventTime = -1;
    private transient volatile long lastRecordLag;
    private transient Counter malformed;

    private CsvDeserializer(Format format, Class<T> type) {
        this.format = format;
        this.type = type;
    }

    public static CsvDeserializer<Bid> bids() {
        return new CsvDeserializer<>(Format.BID, Bid.class);
    }

    public static CsvDeserializer<Person> persons() {
        return new CsvDeserializer<>(Format.PERSON, Person.class);
    }

    public static CsvDeserializer<Auction> auctions() {
        return new CsvDeserializer<>(Format.AUCTION, Auction.class);
    }

    @Override
    public void open(DeserializationSchema.InitializationContext context) {
        lastEventTime = -1;
        MetricGroup group = context.getMetricGroup();
        // Before the first record after a (re)start there is no measurement: NaN, not 0, so a
        // restarting job never looks as if it had no latency.
        group.gauge("eventTimeLag", (Gauge<Double>) () -> {
            long t = lastEventTime;
            return t < 0 ? Double.NaN : (double) Math.max(0L, System.currentTimeMillis() - t);
        });
        group.gauge("recordLag", (Gauge<Double>) () -> lastEventTime < 0 ? Double.NaN : (double) lastRecordLag);
        malformed = group.counter("malformedRecords");
    }

    @SuppressWarnings("unchecked")
    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<T> out) {
        byte[] value = record.value();
        if (value == null) {
            return;
        }
        String line = new String(value, StandardCharsets.UTF_8);
        Object parsed;
        try {
            parsed = switch (format) {
                case BID -> Bid.parse(line);
                case PERSON -> Person.parse(line);
                case AUCTION -> Auction.parse(line);
            };
        } catch (RuntimeException e) {
            if (malformed != null) {
                malformed.inc();
            }
            return;
        }
        long ts = record.timestamp();
        long now = System.currentTimeMillis();
        lastEventTime = ts;
        lastRecordLag = Math.max(0L, now - ts);
        out.collect((T) parsed);
    }

    @Override
    public TypeInformation<T> getProducedType() {
        return TypeInformation.of(type);
    }
}
