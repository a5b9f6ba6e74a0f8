package bench.nexmark;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/** {@code --key value} / {@code --flag} command-line arguments (no Flink dependency: the generator uses it too). */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + a);
            }
            String key = a.substring(2);
            int eq = key.indexOf('=');
            if (eq >= 0) {
                values.put(key.substring(0, eq), key.substring(eq + 1));
            } else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                values.put(key, argv[++i]);
            } else {
                values.put(key, "true");
            }
        }
    }

    String get(String key, String dflt) {
        return values.getOrDefault(key, dflt);
    }

    String required(String key) {
        String v = values.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing required argument --" + key);
        }
        return v;
    }

    boolean has(String key) {
        return values.containsKey(key);
    }

    boolean flag(String key) {
        return Boolean.parseBoolean(values.getOrDefault(key, "false"));
    }

    long getLong(String key, long dflt) {
        return values.containsKey(key) ? Long.parseLong(values.get(key)) : dflt;
    }

    int getInt(String key, int dflt) {
        return values.containsKey(key) ? Integer.parseInt(values.get(key)) : dflt;
    }

    double getDouble(String key, double dflt) {
        return values.containsKey(key) ? Double.parseDouble(values.get(key)) : dflt;
    }

    /** Parses {@code a=1,b=2} into an ordered map. */
    static Map<String, Integer> parseIntMap(String spec) {
        Map<String, Integer> out = new LinkedHashMap<>();
        if (spec == null || spec.isBlank()) {
            return out;
        }
        for (String part : spec.split(",")) {
            String[] kv = part.trim().split("=");
            if (kv.length != 2) {
                throw new IllegalArgumentException("expected name=N in '" + spec + "', got '" + part + "'");
            }
            out.put(kv[0].trim(), Integer.parseInt(kv[1].trim()));
        }
        return out;
    }
}
