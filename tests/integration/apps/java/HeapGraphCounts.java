import java.util.ArrayList;
import java.util.List;

/*
 * A heap with exact counts for the heap graph test (issue #20, jvm_heapgraph.sh):
 * A instances of HeapGraphCounts$Alpha, B of HeapGraphCounts$Beta (each
 * Beta refers to one Alpha), all reachable from static lists, and one
 * secret string whose characters must not reach the heap graph. Prints
 * "ready" and sleeps. usage: java HeapGraphCounts A B SECRET [SECONDS]
 */
public class HeapGraphCounts {
    static final class Alpha {
        final int n;
        Alpha(int n) { this.n = n; }
    }

    static final class Beta {
        final Alpha alpha;
        final long bits;
        Beta(Alpha alpha, long bits) { this.alpha = alpha; this.bits = bits; }
    }

    static final List<Alpha> ALPHAS = new ArrayList<>();
    static final List<Beta> BETAS = new ArrayList<>();
    static String secret;

    public static void main(String[] args) throws Exception {
        int a = Integer.parseInt(args[0]);
        int b = Integer.parseInt(args[1]);
        // Built at run time, so it is a heap string, not only a constant.
        // "env": from HG_SECRET, so that it is not in the process's
        // cmdline, which the heap graph keeps as process metadata.
        String s = args[2].equals("env") ? System.getenv("HG_SECRET") : args[2];
        secret = new StringBuilder(s).append("-held").toString();
        int secs = args.length > 3 ? Integer.parseInt(args[3]) : 300;
        for (int i = 0; i < a; i++)
            ALPHAS.add(new Alpha(i));
        for (int i = 0; i < b; i++)
            BETAS.add(new Beta(ALPHAS.get(i % a), 0x5ec7e75ec7e7L + i));
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(secs * 1000L);
    }
}
