// it_method_events_jvm's program for a class whose load straddles the
// ClassFileLoadHook's enabling (runtime/jvmti jve_recheck). GateLoader
// defines LateTarget itself; HotSpot posts the ClassFileLoadHook for its
// bytes first, then resolves its superclass LateBase through the same
// loader, which waits there: LateTarget has passed the hook's call and is
// not yet a loaded class. Once the test has started a capture of
// LateTarget.hit and seen its hooks go in, it opens the gate, LateTarget
// is defined, and the program calls LateTarget.hit once a millisecond
// until told to stop.
//   java LateLoad DIR
// DIR/waiting: the gate is reached; DIR/open: go on; DIR/defined:
// LateTarget is a class; DIR/stop: stop calling, and exit.
import java.io.File;
import java.io.InputStream;
import java.lang.reflect.Method;

public class LateLoad {
    static File dir;

    static class GateLoader extends ClassLoader {
        GateLoader() {
            super(LateLoad.class.getClassLoader());
        }

        private Class<?> own(String name) throws ClassNotFoundException {
            try (InputStream in = getParent().getResourceAsStream(name + ".class")) {
                byte[] b = in.readAllBytes();
                return defineClass(name, b, 0, b.length);
            } catch (java.io.IOException e) {
                throw new ClassNotFoundException(name, e);
            }
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c != null)
                    return c;
                if (name.equals("LateTarget"))
                    return own(name);
                if (name.equals("LateBase")) {
                    try {
                        new File(dir, "waiting").createNewFile();
                        File open = new File(dir, "open");
                        while (!open.exists())
                            Thread.sleep(5);
                    } catch (Exception e) {
                        throw new ClassNotFoundException(name, e);
                    }
                    return own(name);
                }
                return super.loadClass(name, resolve);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        dir = new File(args[0]);
        Class<?> c = new GateLoader().loadClass("LateTarget");
        Method hit = c.getMethod("hit", int.class);
        new File(dir, "defined").createNewFile();
        File stop = new File(dir, "stop");
        for (int i = 0; !stop.exists(); i++) {
            hit.invoke(null, i);
            Thread.sleep(1);
        }
    }
}
