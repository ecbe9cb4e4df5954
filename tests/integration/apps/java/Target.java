// The methods the JVM method-event tests hook (runtime/jvmti/jv_inject.c;
// test_jv_inject, it_method_events_jvm). register(Object) is the target;
// register(String, int) is a same-named overload that must stay unhooked.
// The other methods give the rewriter the shapes it must shift: a
// tableswitch and a lookupswitch, exception handlers with finally, stack
// map frames of every first-frame kind, long/double locals.
public class Target {
    static int registered;
    static long other;

    public static void register(Object listener) {
        registered++;
    }

    public static void register(String name, int n) {
        other += n;
    }

    // #args (docs/METHOD_EVENTS.md, "Arguments"): an int and a String are
    // recorded, the Object is skipped.
    static int registered3;

    public static void register(int n, String who, Object listener) {
        registered3 += n;
    }

    // A long and a float for the typed argument hooks.
    public static long stamp(long t, float f) {
        return t + (long) f;
    }

    // Called once a round: a second target with too few hits for the
    // overhead budget to judge, which must keep counting when another
    // target of the same capture is removed over the budget.
    static int rounds;

    public static void roundEnd() {
        rounds++;
    }

    // Loop head at a small offset: the first frame is an append_frame.
    public static int mixed(int k) {
        int r = 0;
        for (int i = 0; i < k; i++) {
            switch (i % 5) {
            case 0: r += 1; break;
            case 1: r += 10; break;
            case 2: r += 100; break;
            case 3: r -= 1; break;
            default: r *= 2; break;
            }
            try {
                if (i == 3)
                    throw new IllegalStateException("three");
                r ^= i;
            } catch (IllegalStateException e) {
                r += 1000;
            } finally {
                r++;
            }
        }
        switch (k) {
        case 10: r += 7; break;
        case 1000: r += 9; break;
        case 100000: r += 11; break;
        default: break;
        }
        return r;
    }

    // The handler is the first frame: same_locals_1_stack_item at a small delta.
    public static int guarded(int x) {
        try {
            return 100 / x;
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    // The handler sits at offset 56..63: its same_locals_1_stack_item frame
    // no longer fits after the 8-byte hook and becomes the _extended form.
    public static int guardedFar(int x) {
        try {
            int a = x + 1, b = x + 2, c = x + 3, d = x + 4;
            a = a * b + c * d + a * c + b * d + a * d + b * c;
            a += d;
            return 1000 / (a - a + x);
        } catch (ArithmeticException e) {
            return -2;
        }
    }

    // The first branch target at offset 56..63: a same_frame that becomes
    // same_frame_extended.
    public static int far(int x) {
        x = x * 3 + x * 5 + x * 7 + x * 11 + x * 13 + x * 17 + x * 19;
        x = x * 23 + x * 29 + x * 31 + x * 37;
        if (x > 0)
            x += 11;
        return x;
    }

    // An instance method with wide locals, and a loop back to offset 0
    // (the hook must run once per call, not once per iteration).
    public double sum(long[] v, double scale) {
        long s = 0;
        int i = 0;
        do {
            s += v[i];
        } while (++i < v.length);
        return s * scale;
    }
}
