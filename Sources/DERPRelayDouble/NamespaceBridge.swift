/// Forwards TCP connections made to `127.0.0.1:<port>` inside a network namespace to the same
/// port on the caller's loopback, so that an agent started in a namespace reaches the relay and
/// control-plane doubles of a test or benchmark: the listening sockets are made inside the
/// namespace (setns on Python's only thread, then back), the connections out of it in ours.
/// Run as `python3 -c <script> /proc/<pid>/ns/net <port>...`; it prints `ready` once it
/// listens and runs until killed (or, when its stdin is a pipe, until that closes).
public enum NamespaceBridge {
    public static let script = #"""
        import ctypes, os, socket, sys, threading
        libc = ctypes.CDLL(None, use_errno=True)
        home = os.open('/proc/self/ns/net', os.O_RDONLY)
        target = os.open(sys.argv[1], os.O_RDONLY)
        if libc.setns(target, 0x40000000) != 0: sys.exit('setns failed')
        listeners = []
        for port in [int(p) for p in sys.argv[2:]]:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(('127.0.0.1', port))
            s.listen(64)
            listeners.append((s, port))
        if libc.setns(home, 0x40000000) != 0: sys.exit('setns back failed')
        def pump(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data: break
                    b.sendall(data)
            except OSError:
                pass
            finally:
                try: b.shutdown(socket.SHUT_WR)
                except OSError: pass
        def serve(s, port):
            while True:
                c, _ = s.accept()
                try:
                    u = socket.create_connection(('127.0.0.1', port), timeout=10)
                    u.settimeout(None)
                except OSError:
                    c.close(); continue
                # No Nagle: DERP frames are small and latency-bound.
                for conn in (c, u):
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                threading.Thread(target=pump, args=(c, u), daemon=True).start()
                threading.Thread(target=pump, args=(u, c), daemon=True).start()
        for s, port in listeners:
            threading.Thread(target=serve, args=(s, port), daemon=True).start()
        print('ready', flush=True)
        import signal, stat
        if stat.S_ISFIFO(os.fstat(0).st_mode):
            sys.stdin.read()  # until the parent closes the pipe (or dies)
        else:
            signal.pause()
        """#
}
