import java.util.ArrayList;
import java.util.List;

/*
 * A heap with known contents for the heap-dump tests: Leak.NODES holds
 * N Leak$Node instances (each linked to the previous one) and Leak.BLOBS
 * holds M byte[1024] filled with 0x5a. Prints "ready" and sleeps in main.
 * usage: java Leak [N] [M] [SECONDS]
 */
public class Leak {
    static final class Node {
        final int id;
        final long payload;
        final Node prev;
        Node(int id, Node prev) {
            this.id = id;
            this.payload = 0x5a5a5a5a5a5a5a5aL ^ id;
            this.prev = prev;
        }
    }

    static final List<Node> NODES = new ArrayList<>();
    static final List<byte[]> BLOBS = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 100000;
        int m = args.length > 1 ? Integer.parseInt(args[1]) : 50000;
        int secs = args.length > 2 ? Integer.parseInt(args[2]) : 600;
        Node prev = null;
        for (int i = 0; i < n; i++) {
            prev = new Node(i, prev);
            NODES.add(prev);
        }
        for (int i = 0; i < m; i++) {
            byte[] b = new byte[1024];
            java.util.Arrays.fill(b, (byte) 0x5a);
            BLOBS.add(b);
        }
        System.out.println("ready");
        System.out.flush();
        sleepHere(secs);
    }

    static void sleepHere(int secs) throws InterruptedException {
        Thread.sleep(secs * 1000L);
    }
}
