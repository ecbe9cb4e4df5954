import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/*
 * A live set that only grows, for an OOM by a memory limit outside Java
 * (tests/vm/init.sh, case jvm): the thread "grower" keeps adding
 * OomGrow$Chunk objects, each holding a byte[CHUNK_KIB KiB] filled with
 * 0x5a (so every page is touched, and the redacted dump can be told from
 * the raw one), pausing PAUSE_MS after each, until the process is killed.
 * Run with an -Xmx above the cgroup's memory.max, the kernel's OOM killer
 * ends it before Java's OutOfMemoryError could.
 * Prints "pid N" at start, then "grown M MiB" every 16 MiB.
 * usage: java OomGrow [CHUNK_KIB] [PAUSE_MS]
 */
public class OomGrow {
    static final class Chunk {
        final int seq;
        final byte[] data;

        Chunk(int seq, int bytes) {
            this.seq = seq;
            this.data = new byte[bytes];
            Arrays.fill(this.data, (byte) 0x5a);
        }
    }

    static final List<Chunk> LIVE = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        final int kib = args.length > 0 ? Integer.parseInt(args[0]) : 256;
        final long pause = args.length > 1 ? Long.parseLong(args[1]) : 10;
        System.out.println("pid " + ProcessHandle.current().pid());
        Thread t = new Thread(() -> {
            long bytes = 0;
            for (int seq = 0;; seq++) {
                synchronized (LIVE) {
                    LIVE.add(new Chunk(seq, kib * 1024));
                }
                bytes += kib * 1024L;
                if (bytes % (16L << 20) < kib * 1024L)
                    System.out.println("grown " + (bytes >> 20) + " MiB");
                try {
                    Thread.sleep(pause);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "grower");
        t.start();
        t.join();
    }
}
