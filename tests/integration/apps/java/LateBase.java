// The superclass of LateTarget (LateLoad.java): GateLoader holds its load.
public class LateBase {
    static volatile long sink;
}
