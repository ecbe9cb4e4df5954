// it_jvm_oom_graph's JVM: the heap is filled by one named thread,
// "hg-oom-filler", in OomThread.fillHeap, while main and a second named
// thread ("hg-oom-bystander") only sleep. So the OutOfMemoryError's thread,
// and its stack, are told apart from the others by name and by method.
// Waits for the file args[0] (created once the agent is connected) first.
import java.io.File;
import java.util.ArrayList;
import java.util.List;

public class OomThread {
    static final List<byte[]> hold = new ArrayList<>();

    static void fillHeap() {
        while (true)
            hold.add(new byte[256 * 1024]);
    }

    static void idle() {
        try {
            Thread.sleep(600_000);
        } catch (InterruptedException e) {
            // asked to stop
        }
    }

    public static void main(String[] args) throws Exception {
        File go = new File(args[0]);
        Thread bystander = new Thread(OomThread::idle, "hg-oom-bystander");
        bystander.setDaemon(true);
        bystander.start();
        System.out.println("pid " + ProcessHandle.current().pid());
        while (!go.exists())
            Thread.sleep(20);
        Thread filler = new Thread(OomThread::fillHeap, "hg-oom-filler");
        filler.start();
        filler.join();
        System.exit(3);
    }
}
