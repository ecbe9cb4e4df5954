// Calls System.gc() every 200 ms for args[0] seconds (default 30), with some
// garbage in between, so a system trace holds GC pauses.
public class GcLoop {
    static volatile Object keep;

    public static void main(String[] args) throws Exception {
        long secs = args.length > 0 ? Long.parseLong(args[0]) : 30;
        long end = System.nanoTime() + secs * 1_000_000_000L;
        int n = 0;
        System.out.println("pid " + ProcessHandle.current().pid());
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++)
                keep = new byte[1024];
            System.gc();
            n++;
            Thread.sleep(200);
        }
        System.out.println("gcs " + n);
    }
}
