// A Java stand-in for the agent's native hook (profilingd/MethodHook.hit):
// test_jv_inject rewrites Target.class to call TestHook.hit(id) and counts.
public class TestHook {
    public static final int[] hits = new int[16];

    public static void hit(int id) {
        hits[id & 15]++;
    }
}
