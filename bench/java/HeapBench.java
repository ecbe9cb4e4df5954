import java.util.ArrayList;
import java.util.List;

/*
 * The heap-dump benchmark's target: N small linked objects (1M by default)
 * held in a list, and a ticker thread that sleeps 1 ms at a time and prints
 * "gap <ms>" whenever one of its ticks took over 20 ms: that is how long
 * the VM was paused (a heap dump runs at a safepoint).
 * usage: java HeapBench [N]
 */
public class HeapBench {
    static final class Obj {
        final Obj next;
        final int v;
        Obj(Obj next, int v) { this.next = next; this.v = v; }
    }

    static final List<Obj> HELD = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 1000000;
        Obj prev = null;
        for (int i = 0; i < n; i++) {
            prev = new Obj(prev, i);
            HELD.add(prev);
        }
        Thread t = new Thread(() -> {
            long last = System.nanoTime();
            while (true) {
                try { Thread.sleep(1); } catch (InterruptedException e) { return; }
                long now = System.nanoTime();
                long gap = (now - last) / 1000000;
                if (gap > 20) {
                    System.out.println("gap " + gap);
                    System.out.flush();
                }
                last = now;
            }
        });
        t.setDaemon(true);
        t.start();
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(3600 * 1000L);
    }
}
