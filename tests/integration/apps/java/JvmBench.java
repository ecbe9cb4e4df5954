// Throughput workload for bench/jvm_stack_overhead.sh: args[1] threads
// (default 2) run HotCold-style rounds; after a 2 s warm-up, rounds are
// counted for args[0] seconds and printed as work_rate=<rounds/s> and
// cpu_rate=<rounds per process CPU second>; then a 2 s tail of uncounted work.
import java.lang.management.ManagementFactory;
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
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        counting = true;
        long t0 = System.nanoTime(), c0 = os.getProcessCpuTime();
        Thread.sleep(secs * 1000);
        counting = false;
        long n = rounds.get();
        double el = (System.nanoTime() - t0) / 1e9;
        double cpu = (os.getProcessCpuTime() - c0) / 1e9;
        Thread.sleep(2000); // a tail, so a capture that started late still covers the window
        done = true;
        for (Thread t : ts)
            t.join();
        System.out.printf("work_rate=%.1f%n", n / el);
        // Rounds per second of the whole process's CPU (the agent's included):
        // on a shared machine this is steadier than the wall-clock rate.
        System.out.printf("cpu_rate=%.1f%n", n / cpu);
        System.out.printf("cpu_share=%.2f%n", cpu / el);
    }
}
