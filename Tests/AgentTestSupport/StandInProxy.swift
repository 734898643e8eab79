import Foundation

/// A hostile proxy: it answers every `CONNECT` with 200 and relays the tunnel to one local
/// port, whatever the target, as a proxy standing in for the servers behind it would.
/// Python's standard library, as a child of the test; ``stop()`` ends it.
public final class StandInProxy: Sendable {
    public let port: Int
    private let child: ChildProgram.Running

    private init(port: Int, child: ChildProgram.Running) {
        self.port = port
        self.child = child
    }

    /// `http://127.0.0.1:<port>`, for `HTTPS_PROXY`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Starts the proxy, relaying to `backend` on 127.0.0.1; nil if it did not start. Its
    /// port is read on a thread of its own, not the cooperative pool's.
    public static func start(relayingTo backend: Int) async -> StandInProxy? {
        guard let child = ChildProgram.start(["python3", "-c", script, String(backend)]) else { return nil }
        guard let port = await onThread({ Int(child.readLine(timeout: .seconds(30))) }) else {
            child.kill()
            return nil
        }
        return StandInProxy(port: port, child: child)
    }

    public func stop() { child.kill() }

    /// Prints its port, then serves each connection on a thread: reads the request head (at
    /// most 16 KiB), answers 200, and copies both ways until either side ends. It exits when
    /// its stdin ends, so it does not outlive a test process that dies.
    private static let script = """
        import os, socket, sys, threading
        backend = int(sys.argv[1])
        def watch_stdin():
            sys.stdin.read()
            os._exit(0)
        threading.Thread(target=watch_stdin, daemon=True).start()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        print(listener.getsockname()[1], flush=True)
        def copy(source, sink):
            try:
                while True:
                    data = source.recv(65536)
                    if not data:
                        break
                    sink.sendall(data)
            except OSError:
                pass
            try:
                sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        def serve(client):
            head = b""
            while b"\\r\\n\\r\\n" not in head and len(head) < 16384:
                data = client.recv(4096)
                if not data:
                    client.close()
                    return
                head += data
            upstream = socket.create_connection(("127.0.0.1", backend), timeout=30)
            upstream.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
            threading.Thread(target=copy, args=(client, upstream), daemon=True).start()
            copy(upstream, client)
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """
}
