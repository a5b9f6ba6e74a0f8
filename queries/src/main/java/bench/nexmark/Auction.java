package bench.nexmark;

/**
 * A Nexmark auction. Wire format:
 * {@code id,itemName,description,initialBid,reserve,dateTime,expires,seller,category}
 * (UTF-8 CSV, dateTime = event time in epoch ms = Kafka record timestamp).
 */
public class Auction {
    public long id;
    public String itemName;
    public String description;
    public long initialBid;
    public long reserve;
    public long dateTime;
    public long expires;
    public long seller;
    public long category;

    public Auction() {}

    public Auction(long id, String itemName, String description, long initialBid, long reserve, long dateTime,
                   long expires, long seller, long category) {
        this.id = id;
        this.itemName = itemName;
        this.description = description;
        this.initialBid = initialBid;
        this.reserve = reserve;
        this.dateTime = dateTime;
        this.expires = expires;
        this.seller = seller;
        this.category = category;
    }

    public void appendCsv(StringBuilder sb) {
        sb.append(id).append(',').append(itemName).append(',').append(description).append(',')
                .append(initialBid).append(',').append(reserve).append(',').append(dateTime).append(',')
                .append(expires).append(',').append(seller).append(',').append(category);
    }

    public static Auction parse(String line) {
        Csv c = new Csv(line);
        return new Auction(c.nextLong(), c.next(), c.next(), c.nextLong(), c.nextLong(), c.nextLong(),
                c.nextLong(), c.nextLong(), c.nextLong());
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        appendCsv(sb);
        return sb.toString();
    }
}
