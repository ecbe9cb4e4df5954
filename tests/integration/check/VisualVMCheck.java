import java.io.File;
import java.util.List;

import org.graalvm.visualvm.lib.jfluid.heap.GCRoot;
import org.graalvm.visualvm.lib.jfluid.heap.Heap;
import org.graalvm.visualvm.lib.jfluid.heap.HeapFactory;
import org.graalvm.visualvm.lib.jfluid.heap.Instance;
import org.graalvm.visualvm.lib.jfluid.heap.JavaClass;
import org.graalvm.visualvm.lib.jfluid.heap.ObjectArrayInstance;
import org.graalvm.visualvm.lib.jfluid.heap.ThreadObjectGCRoot;

/*
 * Opens a heap dump with VisualVM's own HPROF library (Debian's visualvm
 * package) and prints what the JVM tests compare: instances per class,
 * whether an object array references CLASS[0] instances, and the thread
 * stacks VisualVM shows. usage: VisualVMCheck FILE CLASS...
 */
public class VisualVMCheck {
    public static void main(String[] args) throws Exception {
        Heap heap = HeapFactory.createHeap(new File(args[0]));
        System.out.println("visualvm_classes " + heap.getAllClasses().size());
        for (int i = 1; i < args.length; i++) {
            JavaClass c = heap.getJavaClassByName(args[i]);
            System.out.println("visualvm_instances " + args[i] + " " + (c == null ? -1 : c.getInstancesCount()));
        }
        if (args.length > 1) {
            JavaClass target = heap.getJavaClassByName(args[1]);
            JavaClass arr = heap.getJavaClassByName("java.lang.Object[]");
            long best = 0;
            if (target != null && arr != null) {
                for (Instance a : arr.getInstances()) {
                    long n = 0;
                    for (Object v : ((ObjectArrayInstance) a).getValues())
                        if (v instanceof Instance && ((Instance) v).getJavaClass().equals(target))
                            n++;
                    best = Math.max(best, n);
                }
            }
            System.out.println("visualvm_max_refs_to " + args[1] + " " + best);
        }
        int threads = 0;
        for (GCRoot r : heap.getGCRoots()) {
            if (r instanceof ThreadObjectGCRoot) {
                StackTraceElement[] st = ((ThreadObjectGCRoot) r).getStackTrace();
                threads++;
                if (st != null && st.length > 0)
                    System.out.println("visualvm_stack " + st[st.length - 1]);
            }
        }
        System.out.println("visualvm_threads " + threads);
    }
}
