package bench.nexmark;

import java.util.SplittableRandom;

/**
 * Builds Nexmark events from a global event number, following the Nexmark generator's layout
 * (Tucker et al., NEXMark; Apache Beam's nexmark GeneratorConfig): every block of 50 events holds
 * 1 person (offset 0), 3 auctions (offsets 1-3) and 46 bids (offsets 4-49). Ids are dense and
 * derived from the event number, so several producer threads can generate disjoint event numbers
 * without coordination. Hot auctions/bidders are off: bids pick an auction uniformly among the
 * last {@link #IN_FLIGHT_AUCTIONS} auctions and a bidder among the last {@link #ACTIVE_PEOPLE} people;
 * auctions pick their seller the same way. Not thread-safe (one instance per producer thread).
 */
public final class EventFactory {
    public static final int PROPORTION_DENOMINATOR = 50;
    public static final int PERSON_PROPORTION = 1;
    public static final int AUCTION_PROPORTION = 3;
    public static final long FIRST_PERSON_ID = 1000;
    public static final long FIRST_AUCTION_ID = 1000;
    public static final long FIRST_CATEGORY_ID = 10;
    public static final int NUM_CATEGORIES = 5;
    public static final int IN_FLIGHT_AUCTIONS = 100;
    public static final int ACTIVE_PEOPLE = 1000;

    static final String[] US_STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
    static final String[] US_CITIES = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
        "Redmond", "Seattle", "Kent", "Cheyenne"};
    static final String[] FIRST_NAMES = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
        "Deiter", "Walter"};
    static final String[] LAST_NAMES = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith",
        "Jones", "Noris"};
    static final String[] CHANNELS = {"Google", "Facebook", "Baidu", "Apple"};
    private static final char[] ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789".toCharArray();

    public enum Kind { PERSON, AUCTION, BID }

    private final SplittableRandom rnd;
    private final StringBuilder sb = new StringBuilder(256);

    public EventFactory(long seed) {
        this.rnd = new SplittableRandom(seed);
    }

    public static Kind kindOf(long eventNumber) {
        int offset = (int) (eventNumber % PROPORTION_DENOMINATOR);
        if (offset < PERSON_PROPORTION) {
            return Kind.PERSON;
        }
        if (offset < PERSON_PROPORTION + AUCTION_PROPORTION) {
            return Kind.AUCTION;
        }
        return Kind.BID;
    }

    /** Id of the newest person created at or before this event. */
    static long lastPersonId(long eventNumber) {
        return FIRST_PERSON_ID + eventNumber / PROPORTION_DENOMINATOR;
    }

    /** Id of the newest auction created at or before this event (clamped at the first auction). */
    static long lastAuctionId(long eventNumber) {
        long epoch = eventNumber / PROPORTION_DENOMINATOR;
        int offset = (int) (eventNumber % PROPORTION_DENOMINATOR);
        long inEpoch = Math.min(Math.max(offset - PERSON_PROPORTION, -1), AUCTION_PROPORTION - 1);
        return Math.max(FIRST_AUCTION_ID, FIRST_AUCTION_ID + epoch * AUCTION_PROPORTION + inEpoch);
    }

    private long recentPerson(long eventNumber) {
        long last = lastPersonId(eventNumber);
        return Math.max(FIRST_PERSON_ID, last - rnd.nextInt(ACTIVE_PEOPLE));
    }

    /** Nexmark's price distribution: 10^(6u) cents, u ~ U(0,1). */
    private long price() {
        return Math.round(Math.pow(10.0, rnd.nextDouble() * 6.0) * 100.0);
    }

    private String word(int len) {
        char[] c = new char[len];
        for (int i = 0; i < len; i++) {
            c[i] = ALNUM[rnd.nextInt(ALNUM.length)];
        }
        return new String(c);
    }

    public Person person(long eventNumber, long timestamp) {
        long id = lastPersonId(eventNumber);
        String name = FIRST_NAMES[rnd.nextInt(FIRST_NAMES.length)] + " " + LAST_NAMES[rnd.nextInt(LAST_NAMES.length)];
        String email = word(7) + "@" + word(5) + ".com";
        String cc = String.format("%04d %04d %04d %04d", rnd.nextInt(10000), rnd.nextInt(10000),
                rnd.nextInt(10000), rnd.nextInt(10000));
        return new Person(id, name, email, cc, US_CITIES[rnd.nextInt(US_CITIES.length)],
                US_STATES[rnd.nextInt(US_STATES.length)], timestamp);
    }

    public Auction auction(long eventNumber, long timestamp) {
        long id = lastAuctionId(eventNumber);
        long initial = price();
        long reserve = initial + price();
        long expires = timestamp + 1000L * (10 + rnd.nextInt(110));
        return new Auction(id, word(12), word(24), initial, reserve, timestamp, expires, recentPerson(eventNumber),
                FIRST_CATEGORY_ID + rnd.nextInt(NUM_CATEGORIES));
    }

    public Bid bid(long eventNumber, long timestamp) {
        long lastAuction = lastAuctionId(eventNumber);
        long auction = Math.max(FIRST_AUCTION_ID, lastAuction - rnd.nextInt(IN_FLIGHT_AUCTIONS));
        String url = "https://www.nexmark.com/" + word(5) + "/item.htm?query=1";
        return new Bid(auction, recentPerson(eventNumber), price(), CHANNELS[rnd.nextInt(CHANNELS.length)], url,
                timestamp);
    }

    /** CSV bytes of the event with this number (reuses an internal buffer; the result is a fresh array). */
    public byte[] encode(long eventNumber, long timestamp) {
        sb.setLength(0);
        switch (kindOf(eventNumber)) {
            case PERSON -> person(eventNumber, timestamp).appendCsv(sb);
            case AUCTION -> auction(eventNumber, timestamp).appendCsv(sb);
            default -> bid(eventNumber, timestamp).appendCsv(sb);
        }
        return sb.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    public static String topicOf(Kind kind) {
        return switch (kind) {
            case PERSON -> "persons";
            case AUCTION -> "auctions";
            case BID -> "bids";
        };
    }
}
