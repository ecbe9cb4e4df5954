// it_method_events_jvm's class loaded across the hooks' install (LateLoad.java).
public class LateTarget extends LateBase {
    public static void hit(int i) {
        sink += i;
    }
}
