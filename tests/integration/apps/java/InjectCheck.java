// Runs every method of Target and prints its results and TestHook's
// counts, so test_jv_inject can compare a run over the original
// Target.class with one over the rewritten class (which must also pass
// the verifier: the test runs it with -Xverify:all).
public class InjectCheck {
    public static void main(String[] args) {
        for (int i = 0; i < 3; i++)
            Target.register(new Object());
        Target.register("x", 5);
        StringBuilder sb = new StringBuilder();
        sb.append("mixed=").append(Target.mixed(10)).append(' ').append(Target.mixed(1000));
        sb.append(" guarded=").append(Target.guarded(5)).append(' ').append(Target.guarded(0));
        sb.append(" guardedFar=").append(Target.guardedFar(5)).append(' ')
            .append(Target.guardedFar(0));
        sb.append(" far=").append(Target.far(3)).append(' ').append(Target.far(-3));
        sb.append(" sum=").append(new Target().sum(new long[] { 1, 2, 3 }, 0.5));
        Target.register(7, "alice@example.com", sb);
        sb.append(" stamp=").append(Target.stamp(5L, 1.5f));
        sb.append(" registered=").append(Target.registered).append(" other=").append(Target.other);
        sb.append(" hits=");
        for (int i = 0; i < 8; i++)
            sb.append(TestHook.hits[i]).append(i < 7 ? "," : "");
        sb.append(" args=").append(TestHook.log);
        System.out.println(sb);
    }
}
