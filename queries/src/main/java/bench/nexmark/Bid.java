package bench.nexmark;

/**
 * A Nexmark bid. Wire format (Kafka record value, UTF-8 CSV, no header):
 * {@code auction,bidder,price,channel,url,dateTime}; dateTime is the event time in epoch ms and
 * equals the Kafka record timestamp. Public fields and a no-arg constructor make it a Flink POJO.
 */
public class Bid {
    public long auction;
    public long bidder;
    public long price;
    public String channel;
    public String url;
    public long dateTime;

    public Bid() {}

    public Bid(long auction, long bidder, long price, String channel, String url, long dateTime) {
        this.auction = auction;
        this.bidder = bidder;
        this.price = price;
        this.channel = channel;
        this.url = url;
        this.dateTime = dateTime;
    }

    public void appendCsv(StringBuilder sb) {
        sb.append(auction).append(',').append(bidder).append(',').append(price).append(',')
                .append(channel).append(',').append(url).append(',').append(dateTime);
    }

    public static Bid parse(String line) {
        Csv c = new Csv(line);
        return new Bid(c.nextLong(), c.nextLong(), c.nextLong(), c.next(), c.next(), c.nextLong());
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        appendCsv(sb);
        return sb.toString();
    }
}
