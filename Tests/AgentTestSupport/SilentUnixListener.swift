/// A unix socket listener of another user (`setpriv`, Debian's python3): it accepts one
/// connection, reads it and never answers, for at most a minute. For a client's check of who
/// serves its socket; the test needs root.
public enum SilentUnixListener {
    /// Whether this host can run one (root, setpriv and python3).
    public static var available: Bool {
        geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && access("/usr/bin/python3", X_OK) == 0
    }

    /// Listens at `path` (its directory writable by `uid`) as `uid`; nil when it did not
    /// start. The caller ends it with ``ChildProgram/Running/kill()``.
    public static func start(at path: String, uid: Int) -> ChildProgram.Running? {
        let script = """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(sys.argv[1]); s.listen(4)
            print("ready", flush=True)
            s.settimeout(60)
            try:
                c, _ = s.accept(); c.settimeout(60); c.recv(4096); time.sleep(60)
            except Exception:
                pass
            """
        guard
            let server = ChildProgram.start([
                "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", script, path,
            ])
        else { return nil }
        guard server.readLine(timeout: .seconds(60)) == "ready" else {
            server.kill()
            return nil
        }
        return server
    }
}

#if canImport(Glibc)
import Glibc
#endif
