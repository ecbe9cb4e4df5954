// Two hot methods at about 3:1 CPU on one thread: hot() does three times
// the work of cold() per round. Runs for args[0] seconds (default 30).
public class HotCold {
    static volatile long sink;

    static long hot(long seed) {
        long x = seed;
        for (int i = 0; i < 3_000_000; i++)
            x = x * 6364136223846793005L + 1442695040888963407L ^ (x >>> 17);
        return x;
    }

    static long cold(long seed) {
        long x = seed;
        for (int i = 0; i < 1_000_000; i++)
            x = x * 6364136223846793005L + 1442695040888963407L ^ (x >>> 17);
        return x;
    }

    public static void main(String[] args) {
        long secs = args.length > 0 ? Long.parseLong(args[0]) : 30;
        long end = System.nanoTime() + secs * 1_000_000_000L;
        long x = 1, rounds = 0;
        System.out.println("pid " + ProcessHandle.current().pid());
        while (System.nanoTime() < end) {
            x = hot(x);
            x = cold(x);
            rounds++;
        }
        sink = x;
        System.out.println("rounds " + rounds);
    }
}
