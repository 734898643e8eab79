import AgentCore
import Hummingbird
import HummingbirdCore
import HTTPTypes
import Logging
import NIOCore
import NIOPosix

/// Builds the agent's HTTP/WebSocket server from the capability modules' routes.
public enum AgentHTTPServer {
    /// The concrete listener type, a `Service`.
    public typealias App = AgentHTTPListener

    /// Makes a server that listens on `address` and serves `mounts`: an ``AgentHTTPServing``
    /// and its one listener. (The host builds the serving itself, so that connections
    /// handed over from elsewhere are served by the same routes: ``AgentHTTPServing/serve(_:listener:remote:)``.)
    /// - Parameters:
    ///   - address: where to listen (loopback by default, see ``BindTarget``).
    ///   - mounts: every capability module's routes, each at its base path.
    ///   - connections: the open connections (the host stops and closes them at shutdown).
    ///   - listener: the name requests see as `AgentRequestContext.listener`.
    ///   - accessLog: log one line per request at info.
    ///   - eventLoopGroup: NIO's singleton, or another group that is never shut down.
    ///   - logger: server logger.
    ///   - onServerRunning: called with the listening channel (its local address carries the real port).
    public static func makeApplication(
        address: BindTarget,
        mounts: [HTTPMount],
        connections: HTTPConnectionRegistry = HTTPConnectionRegistry(),
        headTimeout: Duration = AgentHTTPLimits.requestHeadTimeout,
        bodyTimeout: Duration = AgentHTTPLimits.requestBodyTimeout,
        webSocketPingInterval: Duration = AgentHTTPLimits.webSocketPingInterval,
        writeStallTimeout: Duration = AgentHTTPLimits.responseWriteStallTimeout,
        listener: String = ListenerName.http,
        accessLog: Bool = true,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> App {
        AgentHTTPServing(
            mounts: mounts, connections: connections, headTimeout: headTimeout, bodyTimeout: bodyTimeout,
            webSocketPingInterval: webSocketPingInterval, writeStallTimeout: writeStallTimeout, accessLog: accessLog, logger: logger
        ).application(address: address, listener: listener, eventLoopGroup: eventLoopGroup, onServerRunning: onServerRunning)
    }
}

extension Parameters {
    /// Every path parameter, as it appears in the path.
    public var rawParameters: [String: String] {
        var out: [String: String] = [:]
        for (key, value) in self { out[String(key)] = String(value) }
        return out
    }
}

/// A parsed listen address: `host:port`, `[v6]:port`, or `unix:/path`.
public struct BindTarget: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    /// Loopback, port 2114: not reachable from outside the workspace.
    public static let defaultAddress = "127.0.0.1:2114"

    public let kind: Kind

    public init(kind: Kind) { self.kind = kind }

    /// What an empty host (`:2112`) means.
    public enum EmptyHost: Sendable {
        /// 127.0.0.1: the agent's own HTTP API, which has no authentication.
        case loopback
        /// Every interface, as Go's `net.Listen` reads it: the reference's own listeners
        /// (metrics, debug), whose users give `:2112` to be scraped from outside.
        case allInterfaces
    }

    /// Parses an address; throws a one-line reason when it is not one.
    public init(parsing text: String, emptyHost: EmptyHost = .loopback) throws(BindTargetError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw BindTargetError(text, "empty unix socket path") }
            kind = .unix(path: path)
            return
        }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw BindTargetError(text, "expected [ipv6]:port")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw BindTargetError(text, "expected host:port") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { throw BindTargetError(text, "IPv6 hosts need brackets: [::1]:port") }
        }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw BindTargetError(text, "port must be a number from 0 to 65535")
        }
        kind = .tcp(host: host.isEmpty ? (emptyHost == .loopback ? "127.0.0.1" : "0.0.0.0") : String(host), port: port)
    }

    /// True for 127.0.0.0/8, ::1, localhost and unix sockets.
    public var isLoopback: Bool {
        switch kind {
        case .unix: return true
        case .tcp(let host, _):
            return host == "localhost" || host == "::1" || host.hasPrefix("127.")
        }
    }

    var bindAddress: BindAddress {
        switch kind {
        case .tcp(let host, let port): return .hostname(host, port: port)
        case .unix(let path): return .unixDomainSocket(path: path)
        }
    }

    public var description: String {
        switch kind {
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): return "unix:\(path)"
        }
    }
}

/// Why an address did not parse.
public struct BindTargetError: Error, CustomStringConvertible {
    public let description: String
    init(_ text: String, _ reason: String) { description = "invalid address \"\(text)\": \(reason)" }
}
