// Safepoint-bias workload (bench/jvm_safepoint_bias.sh): one thread
// alternates countedLoop(), a long int-counted loop with no calls (no
// safepoint poll inside once C2 drops them, -XX:-UseCountedLoopSafepoints),
// and withCalls(), a loop around a call that is never inlined. It times
// both itself and prints the true shares at the end. args: seconds
// (default 10), then milliseconds of warm-up not counted in the shares
// (default 0), so that they cover about the window a capture samples.
public class SafepointBias {
    static volatile long sink;

    static long countedLoop(long x) {
        for (int i = 0; i < 20_000_000; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    static long step(long x) {
        x ^= x << 13;
        x ^= x >>> 7;
        return x ^ (x << 17);
    }

    static long withCalls(long x) {
        for (int i = 0; i < 5_000_000; i++)
            x = step(x);
        return x;
    }

    public static void main(String[] args) {
        long secs = args.length > 0 ? Long.parseLong(args[0]) : 10;
        long skipMs = args.length > 1 ? Long.parseLong(args[1]) : 0;
        long begin = System.nanoTime();
        long end = begin + secs * 1_000_000_000L, from = begin + skipMs * 1_000_000L;
        long x = 1, tCounted = 0, tCalls = 0;
        System.out.println("pid " + ProcessHandle.current().pid());
        while (System.nanoTime() < end) {
            long t0 = System.nanoTime();
            x = countedLoop(x);
            long t1 = System.nanoTime();
            x = withCalls(x);
            long t2 = System.nanoTime();
            if (t0 >= from) {
                tCounted += t1 - t0;
                tCalls += t2 - t1;
            }
        }
        sink = x;
        double all = tCounted + tCalls;
        System.out.printf("truth countedLoop=%.1f%% withCalls=%.1f%%%n",
                100 * tCounted / all, 100 * tCalls / all);
    }
}
