// Waits until the file args[0] exists (the test creates it once the agent
// is connected), then fills the heap until OutOfMemoryError ends the JVM.
import java.io.File;
import java.util.ArrayList;
import java.util.List;

public class OomFill {
    static final List<byte[]> hold = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        File go = new File(args[0]);
        System.out.println("pid " + ProcessHandle.current().pid());
        while (!go.exists())
            Thread.sleep(20);
        while (true)
            hold.add(new byte[256 * 1024]);
    }
}
