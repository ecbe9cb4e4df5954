// A Java stand-in for the agent's native hook (profilingd/MethodHook.hit):
// test_jv_inject rewrites Target.class to call TestHook.hit(id) and counts.
public class TestHook {
    public static final int[] hits = new int[16];

    public static void hit(int id) {
        hits[id & 15]++;
    }

    // The typed argument hooks (#args): "index=value;" each.
    public static final StringBuilder log = new StringBuilder();

    public static void argI(int i, int v) {
        log.append(i).append('=').append(v).append(';');
    }

    public static void argJ(int i, long v) {
        log.append(i).append("=J").append(v).append(';');
    }

    public static void argF(int i, float v) {
        log.append(i).append("=F").append(v).append(';');
    }

    public static void argD(int i, double v) {
        log.append(i).append("=D").append(v).append(';');
    }

    public static void argS(int i, String v) {
        log.append(i).append("=S").append(v).append(';');
    }
}
