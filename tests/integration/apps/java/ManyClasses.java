// bench/jvm_method_events' JVM with many classes: defines N copies of
// Tpl0000 (renamed Tpl0001.., same-length names, so no length in the class
// file changes) in its own class loader, touches Target so that it is
// loaded, prints "ready", and calls Target.register until the file STOP
// appears.
//   java ManyClasses N STOP
import java.io.File;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;

public class ManyClasses extends ClassLoader {
    ManyClasses() {
        super("many", ManyClasses.class.getClassLoader());
    }

    Class<?> define(String name, byte[] b) {
        return defineClass(name, b, 0, b.length);
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        File stop = new File(args[1]);
        byte[] tpl;
        try (InputStream in = ManyClasses.class.getResourceAsStream("/Tpl0000.class")) {
            tpl = in.readAllBytes();
        }
        byte[] from = "Tpl0000".getBytes("UTF-8");
        ManyClasses loader = new ManyClasses();
        List<Class<?>> keep = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            String name = String.format("T%06d", i);
            byte[] to = name.getBytes("UTF-8");
            byte[] b = tpl.clone();
            for (int k = 0; k + from.length <= b.length; k++) {
                boolean eq = true;
                for (int j = 0; j < from.length && eq; j++)
                    eq = b[k + j] == from[j];
                if (eq)
                    System.arraycopy(to, 0, b, k, to.length);
            }
            keep.add(loader.define(name, b));
        }
        Object l = new Object();
        Target.register(l);
        System.out.println("ready " + keep.size());
        System.out.flush();
        while (!stop.exists()) {
            Target.register(l);
            Thread.sleep(1);
        }
    }
}
