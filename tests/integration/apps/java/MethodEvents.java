// it_method_events_jvm's program (tests/integration/method_events_jvm.sh).
// Each round calls Target.register(Object) 300 times from siteA and 100
// times from siteB, the same-named overload register(String, int) 100
// times, register(int, String, Object) 4 times (1..4, "alice@example.com"
// for odd, "bob" for even), a cheap other method a million times, then
// Target.roundEnd() once. Round K starts when
// the file DIR/goK appears and ends by writing DIR/doneK (its checksum).
//   java MethodEvents DIR ROUNDS
import java.io.File;
import java.io.FileWriter;

public class MethodEvents {
    static volatile long sink;

    static long other(long x) {
        return x * 31 + 7;
    }

    static void siteA(Object o) {
        Target.register(o);
    }

    static void siteB(Object o) {
        Target.register(o);
    }

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        int rounds = Integer.parseInt(args[1]);
        Object listener = new Object();
        for (int r = 1; r <= rounds; r++) {
            File go = new File(dir, "go" + r);
            while (!go.exists())
                Thread.sleep(5);
            long s = 0;
            for (int i = 0; i < 1_000_000; i++) {
                s += other(i);
                if (i % 2500 == 0) {
                    if ((i / 2500) % 4 == 3)
                        siteB(listener);
                    else
                        siteA(listener);
                }
                if (i % 10000 == 5)
                    Target.register("overload", 1);
                if (i % 250000 == 11) {
                    int n = i / 250000 + 1;
                    Target.register(n, n % 2 == 1 ? "alice@example.com" : "bob", listener);
                }
            }
            Target.roundEnd();
            sink = s;
            try (FileWriter w = new FileWriter(new File(dir, "done" + r))) {
                w.write(s + " " + Target.registered + " " + Target.other + "\n");
            }
        }
    }
}
