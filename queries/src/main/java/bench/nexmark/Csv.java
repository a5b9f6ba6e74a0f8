package bench.nexmark;

/** Minimal comma splitter: fields never contain commas (the generator only emits [A-Za-z0-9 @.:/?=_-]). */
final class Csv {
    private final String line;
    private int pos;

    Csv(String line) {
        this.line = line;
    }

    String next() {
        if (pos > line.length()) {
            throw new IllegalArgumentException("too few fields in record: " + line);
        }
        int end = line.indexOf(',', pos);
        if (end < 0) {
            end = line.length();
        }
        String s = line.substring(pos, end);
        pos = end + 1;
        return s;
    }

    long nextLong() {
        return Long.parseLong(next());
    }
}
