// Throughput workload for bench/jvm_stack_overhead.sh: args[1] threads
// (default 2) run HotCold-style rounds; after a 2 s warm-up, rounds are
// counted for args[0] seconds and printed as work_rate=<rounds/s>.
import java.util.concurrent.atomic.AtomicLong;

public class JvmBench {
    static final AtomicLong rounds = new AtomicLong();
    static volatile boolean counting, done;
    static volatile long sink;

    static long hot(long x) {
        for (int i = 0; i < 300_000; i++)
            x = x * 6364136223846793005L + 1442695040888963407L ^ (x >>> 17);
        return x;
    }

    static long cold(long x) {
        for (int i = 0; i < 100_000; i++)
            x = x * 6364136223846793005L + 1442695040888963407L ^ (x >>> 17);
        return x;
    }

    public static void main(String[] args) throws Exception {
        long secs = args.length > 0 ? Long.parseLong(args[0]) : 5;
        int nthreads = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        Thread[] ts = new Thread[nthreads];
        for (int t = 0; t < nthreads; t++) {
            ts[t] = new Thread(() -> {
                long x = Thread.currentThread().getId();
                while (!done) {
                    x = cold(hot(x));
                    if (counting)
                        rounds.incrementAndGet();
                }
                sink = x;
            }, "bench-" + t);
            ts[t].start();
        }
        Thread.sleep(2000);
        counting = true;
        long t0 = System.nanoTime();
        Thread.sleep(secs * 1000);
        counting = false;
        long n = rounds.get();
        double el = (System.nanoTime() - t0) / 1e9;
        done = true;
        for (Thread t : ts)
            t.join();
        System.out.printf("work_rate=%.1f%n", n / el);
    }
}
