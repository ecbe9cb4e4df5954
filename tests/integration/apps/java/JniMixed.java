// Mixed Java and native stacks (tests/integration/jvm_mixed.sh): main calls
// the native method nativeWork() (tests/java/jni_mixed.c), which spins in C
// (pd_native_spin) and calls back into Java (javaCallback) in turn, so a
// profile shows Java -> native -> Java. A second thread, "sleeper", only
// sleeps: wall-clock samples must show it, CPU samples must not.
public class JniMixed {
    static volatile long sink;

    static native long nativeWork(long x, int rounds);

    static long javaCallback(long x) {
        for (int i = 0; i < 200_000; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        System.loadLibrary("pd_jni_mixed");
        long secs = args.length > 0 ? Long.parseLong(args[0]) : 10;
        Thread sleeper = new Thread(() -> {
            try {
                for (;;)
                    Thread.sleep(1000);
            } catch (InterruptedException e) {
                // the end
            }
        }, "sleeper");
        sleeper.setDaemon(true);
        sleeper.start();
        System.out.println("pid " + ProcessHandle.current().pid());
        long end = System.nanoTime() + secs * 1_000_000_000L, x = 1;
        while (System.nanoTime() < end)
            x = nativeWork(x, 10);
        sink = x;
    }
}
