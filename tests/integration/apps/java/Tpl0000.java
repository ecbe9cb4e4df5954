// The template ManyClasses copies under other names (Tpl0001, ...): its
// name is the only thing that changes, always 7 bytes long.
public class Tpl0000 {
    static int n;

    public static int touch(int x) {
        return n += x;
    }
}
