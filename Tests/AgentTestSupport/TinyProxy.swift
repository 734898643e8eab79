import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Debian's tinyproxy (`tinyproxy-bin`), a real HTTP proxy, on an ephemeral 127.0.0.1 port:
/// it forwards plain requests and opens `CONNECT` tunnels to any port, optionally behind
/// Basic credentials, and logs each request to a file the test reads (``requests()``).
///
/// A target on 127.0.0.1 is never proxied (Go's rule, which the agent keeps): tests address
/// their servers as `0.0.0.0`, which Linux connects to this host but is not a loopback
/// address to that rule.
public final class TinyProxy: Sendable {
    public let port: Int
    private let directory: String
    private let child: ChildProgram.Running

    private init(port: Int, directory: String, child: ChildProgram.Running) {
        self.port = port
        self.directory = directory
        self.child = child
    }

    /// The proxy's URL for `HTTP_PROXY`/`HTTPS_PROXY`, with the credentials when given.
    public func url(user: String? = nil, password: String? = nil) -> String {
        let credentials = user.map { "\($0):\(password ?? "")@" } ?? ""
        return "http://\(credentials)127.0.0.1:\(port)"
    }

    /// `url` with its 127.0.0.1 host as 0.0.0.0: the same server, but one Go's rule (and the
    /// agent's) sends through a proxy.
    public static func proxiable(_ url: String) -> String {
        url.replacingOccurrences(of: "127.0.0.1", with: "0.0.0.0")
    }

    /// Starts one; `credentials` (letters, digits, `-` and `_` only: tinyproxy's grammar)
    /// makes it answer 407 to requests without them. Bounded: at
    /// most five ports are tried (another process may take the one picked before the proxy
    /// binds it), each given 10 s to listen.
    public static func start(credentials: (user: String, password: String)? = nil) async throws -> TinyProxy {
        var template = Array((NSTemporaryDirectory() + "/tinyproxy.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ProxyStartError("mkdtemp failed") }
        let directory = String(cString: made)
        for _ in 0..<5 {
            let port = freeLoopbackPort()
            var config = """
                Port \(port)
                Listen 127.0.0.1
                Timeout 30
                MaxClients 64
                Allow 127.0.0.1
                DisableViaHeader Yes
                LogLevel Connect
                LogFile "\(directory)/requests.log"

                """
            if let credentials { config += "BasicAuth \(credentials.user) \(credentials.password)\n" }
            try TestFile.write(directory + "/tinyproxy.conf", config)
            guard let child = ChildProgram.start(["tinyproxy", "-d", "-c", directory + "/tinyproxy.conf"]) else {
                throw ProxyStartError("tinyproxy did not start (is Debian's tinyproxy-bin installed?)")
            }
            // Our child, not reaped until `kill`: its pid stays its own meanwhile.
            let instance = ProcessInstance(child.pid)
            var deadline = PollDeadline(.seconds(10))
            while !deadline.hasPassed {
                if instance?.hasEnded ?? true { break }
                // A refused connect is nil; a connected socket closes when it goes.
                if await LoopbackSocket.connect(port: port, timeout: .seconds(5)) != nil {
                    return TinyProxy(port: port, directory: directory, child: child)
                }
                await deadline.sleep(.milliseconds(20))
            }
            child.kill()
        }
        throw ProxyStartError("tinyproxy did not listen on any of five ports")
    }

    /// The request lines the proxy logged so far (`CONNECT 0.0.0.0:8080 HTTP/1.1`,
    /// `GET http://0.0.0.0:8080/x HTTP/1.1`), in order.
    public func requests() -> [String] {
        guard let text = try? String(contentsOfFile: directory + "/requests.log", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "): ", options: []), line.contains("Request (file descriptor") else { return nil }
            return String(line[range.upperBound...])
        }
    }

    /// Ends the proxy and removes its files.
    public func stop() {
        child.terminate(grace: .seconds(5))
        _ = try? FileManager.default.removeItem(atPath: directory)
    }
}

public struct ProxyStartError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
