// bench/jvm_method_events' workload (docs/METHOD_EVENTS.md, "JVM targets").
// After a warm-up (both loops compiled), it prints "ready", waits for the
// file GO (the bench has put its hook in by then, and a retransformation
// drops the class's compiled code: so a second warm-up), then times on its
// own thread CPU clock WORK calls of other() (hooked by nobody) and HITS
// calls of target() (the method the bench hooks), and prints
// "work_ns=W hit_ns=H". WARM: warm-up rounds (default 20; fewer where
// every call is slow, under JVMTI MethodEntry events).
//   java MethodBench GO HITS WORK [WARM]
import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

public class MethodBench {
    static volatile long sink;

    static long other(long x) {
        return x * 31 + 7;
    }

    static long target(long x) {
        return (x ^ 5) + 1;
    }

    static long work(long n) {
        long s = 0;
        for (long i = 0; i < n; i++)
            s += other(i);
        return s;
    }

    static long hits(long n) {
        long s = 0;
        for (long i = 0; i < n; i++)
            s += target(i);
        return s;
    }

    public static void main(String[] args) throws Exception {
        File go = new File(args[0]);
        long nhits = Long.parseLong(args[1]), nwork = Long.parseLong(args[2]);
        int warm = args.length > 3 ? Integer.parseInt(args[3]) : 20;
        ThreadMXBean tm = ManagementFactory.getThreadMXBean();
        for (int i = 0; i < warm; i++)
            sink += work(1_000_000) + hits(10_000);
        System.out.println("ready");
        System.out.flush();
        while (!go.exists())
            Thread.sleep(5);
        for (int i = 0; i < warm; i++)
            sink += work(1_000_000) + hits(1_000);
        long t0 = tm.getCurrentThreadCpuTime();
        long s = work(nwork);
        long t1 = tm.getCurrentThreadCpuTime();
        s += hits(nhits);
        long t2 = tm.getCurrentThreadCpuTime();
        sink = s;
        System.out.println("work_ns=" + (t1 - t0) + " hit_ns=" + (t2 - t1));
    }
}
