import Foundation

/// A hostile proxy: it answers every `CONNECT` (or, as a SOCKS5 proxy, every SOCKS5 connect)
/// with success, or takes a forwarded request, and relays the connection to one local port,
/// whatever the target, as a proxy standing in for the servers behind it would. Python's
/// standard library, as a child of the test; ``stop()`` ends it.
public final class StandInProxy: Sendable {
    public let port: Int
    private let child: ChildProgram.Running

    private init(port: Int, child: ChildProgram.Running, kind: Kind, tls: Bool) {
        self.port = port
        self.child = child
        self.kind = kind
        self.tls = tls
    }

    /// Whether clients reach it over TLS (an `https://` proxy).
    public let tls: Bool

    /// The kind of proxy it stands in as.
    public enum Kind: String, Sendable {
        case http
        case socks5
        /// A SOCKS5 proxy that refuses every connect ("connection refused").
        case socks5Refusing = "socks5-refusing"
        /// A SOCKS5 proxy that closes the connection when asked to connect.
        case socks5Closing = "socks5-closing"
        /// A SOCKS5 proxy that admits only username ``user`` with password ``password``
        /// (RFC 1929), refusing a client that offers no credentials or the wrong ones.
        case socks5Credentials = "socks5-credentials"
    }
    public let kind: Kind

    /// The credentials a ``Kind/socks5Credentials`` proxy admits.
    public static let user = "agent"
    public static let password = "s3cret/:@"

    /// `http://127.0.0.1:<port>` or `socks5://127.0.0.1:<port>` (with the credentials it
    /// admits, for ``Kind/socks5Credentials``), for `HTTPS_PROXY`.
    public var url: String {
        if kind == .socks5Credentials { return url(user: Self.user, password: Self.password) }
        return "\(kind == .http ? (tls ? "https" : "http") : "socks5")://127.0.0.1:\(port)"
    }

    /// `socks5://user:password@127.0.0.1:<port>`, the two percent-encoded.
    public func url(user: String, password: String) -> String {
        let encode = { (text: String) in text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text }
        return "socks5://\(encode(user)):\(encode(password))@127.0.0.1:\(port)"
    }

    /// Starts the proxy, relaying to `backend` on 127.0.0.1; nil if it did not start. Its
    /// port is read on a thread of its own, not the cooperative pool's.
    /// With `tls` (a certificate and its key, PEM files), clients reach it over TLS.
    public static func start(relayingTo backend: Int, as kind: Kind = .http, tls: (certificate: String, key: String)? = nil) async -> StandInProxy? {
        let files = tls.map { [$0.certificate, $0.key] } ?? []
        guard let child = ChildProgram.start(["python3", "-c", script, String(backend), kind.rawValue, user, password] + files) else { return nil }
        guard let port = await onThread({ Int(child.readLine(timeout: .seconds(30))) }) else {
            child.kill()
            return nil
        }
        return StandInProxy(port: port, child: child, kind: kind, tls: tls != nil)
    }

    /// The target of the next connection the proxy was asked for (`host:port`, as the client
    /// named it), in order; empty if none came within 30 s.
    public func nextTarget() async -> String {
        await onThread { [child] in child.readLine(timeout: .seconds(30)) }
    }

    public func stop() { child.kill() }

    /// Prints its port, then serves each connection on a thread: reads the request head (at
    /// most 16 KiB) and answers a `CONNECT` 200 (any other request goes to the backend as it
    /// came), or as SOCKS5 reads the greeting (answering "no
    /// authentication", or for `socks5-credentials` username/password, then checking them)
    /// and the connect request (answering success, or refusing, or closing, by its kind);
    /// prints the target it was asked for (or why it refused the client), and copies both
    /// ways until either side ends. With a certificate and key (arguments 5 and 6) each
    /// connection is TLS first, and both ways are copied by one thread. It exits when its stdin ends, so
    /// it does not outlive a test process that dies.
    private static let script = """
        import ipaddress, os, select, socket, ssl, struct, sys, threading
        backend = int(sys.argv[1])
        mode = sys.argv[2]
        USER = sys.argv[3].encode()
        PASSWORD = sys.argv[4].encode()
        tls = None
        if len(sys.argv) > 6:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(sys.argv[5], sys.argv[6])
        socks = mode.startswith("socks5")
        printing = threading.Lock()
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
        def exactly(client, count):
            data = b""
            while len(data) < count:
                more = client.recv(count - len(data))
                if not more:
                    raise OSError("closed")
                data += more
            return data
        def socks_target(client):
            version, methods = exactly(client, 2)
            offered = exactly(client, methods)
            if mode == "socks5-credentials":
                if 2 not in offered:
                    client.sendall(b"\\x05\\xff")
                    return "refused: no credentials offered"
                client.sendall(b"\\x05\\x02")
                _, length = exactly(client, 2)
                user = exactly(client, length)
                password = exactly(client, exactly(client, 1)[0])
                if (user, password) != (USER, PASSWORD):
                    client.sendall(b"\\x01\\x01")
                    return "refused: wrong credentials"
                client.sendall(b"\\x01\\x00")
            else:
                client.sendall(b"\\x05\\x00")
            _, command, _, kind = exactly(client, 4)
            if kind == 1:
                host = str(ipaddress.IPv4Address(exactly(client, 4)))
            elif kind == 4:
                host = "[" + str(ipaddress.IPv6Address(exactly(client, 16))) + "]"
            else:
                host = exactly(client, exactly(client, 1)[0]).decode()
            port = struct.unpack(">H", exactly(client, 2))[0]
            return host + ":" + str(port)
        def relay(client, upstream):
            # One thread for both ways: a TLS socket is not used from two threads.
            while True:
                ready = [client] if client.pending() else select.select([client, upstream], [], [], 60)[0]
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    (upstream if source is client else client).sendall(data)
        def serve(client):
            try:
                if tls:
                    client = tls.wrap_socket(client, server_side=True)
                if socks:
                    target = socks_target(client)
                else:
                    head = b""
                    while b"\\r\\n\\r\\n" not in head and len(head) < 16384:
                        data = client.recv(4096)
                        if not data:
                            raise OSError("closed")
                        head += data
                    # CONNECT's target, or a forwarded request's absolute URL.
                    target = head.split(b" ")[1].decode()
            except (OSError, ValueError, IndexError):
                client.close()
                return
            with printing:
                print(target, flush=True)
            if target.startswith("refused: "):
                client.close()
                return
            if mode == "socks5-refusing":
                client.sendall(b"\\x05\\x05\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00")
            if mode not in ("socks5", "socks5-credentials") and socks:
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", backend), timeout=30)
            upstream.settimeout(None)
            if socks:
                client.sendall(b"\\x05\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00")
            elif head.startswith(b"CONNECT "):
                client.sendall(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
            else:
                # A forwarded request goes to the backend as it came, absolute URL and all.
                upstream.sendall(head)
            if tls:
                try:
                    relay(client, upstream)
                except OSError:
                    pass
                client.close()
                upstream.close()
                return
            threading.Thread(target=copy, args=(client, upstream), daemon=True).start()
            copy(upstream, client)
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=serve, args=(connection,), daemon=True).start()
        """
}
