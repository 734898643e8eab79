import AgentCore
import FoundationEssentials
import Logging
import NIOCore
import NIOPosix
import NIOSSH
#if canImport(Glibc)
import Glibc
#endif

/// A session's agent forwarding (`ssh -A`) and X11 forwarding (`ssh -X`).
///
/// - Agent: a Unix socket `$TMPDIR/auth-agent-XXXXXX/listener.sock` (directory 0700) named by
///   `SSH_AUTH_SOCK`; each connection to it opens an `auth-agent@openssh.com` channel to the
///   client, which carries it to the client's own agent.
/// - X11: a TCP listener on 127.0.0.1:6000+N, the first free N from 10 (at most 6200, the
///   reference's range), `DISPLAY=localhost:N.<screen>`, the client's (fake) cookie added for
///   this host and display to the Xauthority file; each X connection opens an `x11` channel.
///
/// Listeners are bound before the request is answered (replies keep their order) and close
/// with the session; the agent socket and its directory are removed then. Bounded: at most
/// ``maxConnections`` forwarded connections open per session.
final class SessionForwarding {
    static let maxConnections = 64
    static let firstDisplay = 10
    static let lastPort = 6200

    private let channel: any Channel
    private let environment: [String: String]
    private let logger: Logger
    private var agentListener: (any Channel)?
    private var agentDirectory: String?
    private var x11Listener: (any Channel)?
    private var open = 0
    private var closed = false
    /// What the session's process gets: `SSH_AUTH_SOCK`, `DISPLAY`.
    private(set) var variables: [String: String] = [:]

    init(channel: any Channel, environment: [String: String], logger: Logger) {
        self.channel = channel
        self.environment = environment
        self.logger = logger
    }

    /// A marked request from ``SSHMessageRewriter``; whether it succeeded.
    func request(name: String, value: String, started: Bool) -> Bool {
        switch name {
        case SSHExtensionMarker.keepalive:
            return true
        case SSHExtensionMarker.agentRequest where !started:
            return agentListener != nil || startAgentForwarding()
        case SSHExtensionMarker.x11Request where !started:
            guard x11Listener == nil, let request = X11Request(encoded: value) else { return false }
            return startX11(request)
        default:
            return false
        }
    }

    func close() {
        closed = true
        agentListener?.close(promise: nil)
        x11Listener?.close(promise: nil)
        agentListener = nil
        x11Listener = nil
    }

    // MARK: Agent

    private func startAgentForwarding() -> Bool {
        let temporary = environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((temporary + "/auth-agent-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else { return false }
        let directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let path = directory + "/listener.sock"
        guard let fd = ListeningSocket.unix(path) else {
            rmdir(directory)
            return false
        }
        agentDirectory = directory
        variables["SSH_AUTH_SOCK"] = path
        adopt(fd, marker: SSHExtensionMarker.agentChannel, kind: .agent)
        return true
    }

    // MARK: X11

    private func startX11(_ request: X11Request) -> Bool {
        guard request.authProtocol == "MIT-MAGIC-COOKIE-1", let cookie = Self.hexBytes(request.authCookie) else { return false }
        var display = Self.firstDisplay
        var bound: Int32?
        while 6000 + display <= Self.lastPort, bound == nil {
            bound = ListeningSocket.loopbackTCP(port: UInt16(6000 + display))
            if bound == nil { display += 1 }
        }
        guard let fd = bound else {
            logger.warning("x11 forwarding: no free display between :10 and :200")
            return false
        }
        let authority =
            environment["XAUTHORITY"].flatMap { $0.isEmpty ? nil : $0 }
            ?? SessionCommand.homeDirectory(environment: environment) + "/.Xauthority"
        do {
            try XAuthority.add(
                XAuthority.Entry(
                    family: XAuthority.familyLocal, address: Array(Self.hostName().utf8), number: Array("\(display)".utf8),
                    name: Array(request.authProtocol.utf8), data: cookie),
                to: authority)
        } catch {
            logger.warning("x11 forwarding: could not write the Xauthority file", metadata: ["path": "\(authority)", "error": "\(error)"])
            Glibc.close(fd)
            return false
        }
        variables["DISPLAY"] = "localhost:\(display).\(request.screen)"
        let single = request.singleConnection
        adopt(fd, marker: SSHExtensionMarker.x11Channel, single: single, kind: .x11)
        return true
    }

    // MARK: Listeners

    /// Hands a bound, listening socket to NIO; each accepted connection opens a marked
    /// channel to the client and is joined to it.
    private enum Kind { case agent, x11 }

    private func adopt(_ fd: Int32, marker: String, single: Bool = false, kind: Kind) {
        let loop = channel.eventLoop
        let me = NIOLoopBound(self, eventLoop: loop)
        ServerBootstrap(group: loop)
            .childChannelOption(.autoRead, value: false)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { accepted in
                accepted.eventLoop.makeCompletedFuture { me.value.forward(accepted, marker: marker, closeListener: single) }
            }
            .withBoundSocket(fd)
            .whenComplete { result in
                switch result {
                case .success(let listener):
                    me.value.listening(listener, kind: kind)
                case .failure(let error):
                    me.value.logger.warning("forwarding listener failed", metadata: ["error": "\(error)"])
                }
            }
    }

    private func listening(_ listener: any Channel, kind: Kind) {
        switch kind {
        case .agent:
            agentListener = listener
            if let directory = agentDirectory {
                listener.closeFuture.whenComplete { _ in
                    unlink(directory + "/listener.sock")
                    rmdir(directory)
                }
            }
        case .x11:
            x11Listener = listener
        }
        if closed { listener.close(promise: nil) }
    }

    private func forward(_ accepted: any Channel, marker: String, closeListener: Bool) {
        guard !closed, open < Self.maxConnections,
            let handler = try? channel.parent?.pipeline.syncOperations.handler(type: NIOSSHHandler.self)
        else {
            accepted.close(promise: nil)
            return
        }
        if closeListener { x11Listener?.close(promise: nil) }
        open += 1
        let me = NIOLoopBound(self, eventLoop: channel.eventLoop)
        accepted.closeFuture.whenComplete { _ in me.value.open -= 1 }
        let origin = accepted.remoteAddress.flatMap { $0.ipAddress != nil ? $0 : nil } ?? (try? SocketAddress(ipAddress: "0.0.0.0", port: 0))
        guard let origin else {
            accepted.close(promise: nil)
            return
        }
        ChannelGlue.forwardToClient(
            accepted, through: handler, gate: SSHRekeyGate.of(channel.parent), as: .forwardedTCPIP(.init(listeningHost: marker, listeningPort: 0, originatorAddress: origin)))
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0, digits.count <= 512 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
