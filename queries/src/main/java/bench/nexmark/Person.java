package bench.nexmark;

/**
 * A Nexmark person. Wire format: {@code id,name,emailAddress,creditCard,city,state,dateTime}
 * (UTF-8 CSV, dateTime = event time in epoch ms = Kafka record timestamp).
 */
public class Person {
    public long id;
    public String name;
    public String emailAddress;
    public String creditCard;
    public String city;
    public String state;
    public long dateTime;

    public Person() {}

    public Person(long id, String name, String emailAddress, String creditCard, String city, String state,
                  long dateTime) {
        this.id = id;
        this.name = name;
        this.emailAddress = emailAddress;
        this.creditCard = creditCard;
        this.city = city;
        this.state = state;
        this.dateTime = dateTime;
    }

    public void appendCsv(StringBuilder sb) {
        sb.append(id).append(',').append(name).append(',').append(emailAddress).append(',')
                .append(creditCard).append(',').append(city).append(',').append(state).append(',')
                .append(dateTime);
    }

    public static Person parse(String line) {
        Csv c = new Csv(line);
        return new Person(c.nextLong(), c.next(), c.next(), c.next(), c.next(), c.next(), c.nextLong());
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        appendCsv(sb);
        return sb.toString();
    }
}
