// Allocates mostly from one site: makeChunk() allocates 8 KiB arrays nine
// times as often as makeSmall() allocates small objects. A window of the
// latest chunks stays live. Runs for args[0] seconds (default 30).
public class HeapHog {
    static final Object[] live = new Object[512];
    static volatile long sink;

    static byte[] makeChunk(int i) {
        byte[] b = new byte[8192];
        b[i & 8191] = (byte) i;
        return b;
    }

    static Object makeSmall(int i) {
        return Integer.valueOf(i + 1_000_000);
    }

    public static void main(String[] args) throws Exception {
        long secs = args.length > 0 ? Long.parseLong(args[0]) : 30;
        long end = System.nanoTime() + secs * 1_000_000_000L;
        int i = 0;
        System.out.println("pid " + ProcessHandle.current().pid());
        while (System.nanoTime() < end) {
            for (int k = 0; k < 9; k++)
                live[(i + k) & 511] = makeChunk(i + k);
            sink += makeSmall(i).hashCode();
            i += 9;
            if ((i & 0xfff) == 0)
                Thread.sleep(1); // a steady rate, not a flood of garbage
        }
        System.out.println("allocated " + i);
    }
}
