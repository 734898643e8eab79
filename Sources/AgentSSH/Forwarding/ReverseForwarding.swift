import AgentCore
import NIOCore
import NIOPosix
import NIOSSH

#if canImport(Glibc)
import Glibc
#endif

/// `ssh -R`: the client's `tcpip-forward` requests on one connection. Each listens in the
/// workspace (an empty address is every interface, as the reference does; OpenSSH's client
/// asks for `localhost` unless told otherwise) and opens a `forwarded-tcpip` channel to the
/// client for each connection it accepts. Listeners close on `cancel-tcpip-forward` and
/// with the SSH connection.
///
/// Bounds: at most ``maxListeners`` listeners and ``maxConnections`` forwarded connections
/// open per SSH connection (further ones are refused or closed at once).
final class ReverseForwarding: GlobalRequestDelegate, @unchecked Sendable {
    // Sendable by confinement: NIOSSH calls the delegate on its connection's event loop, and
    // every member is touched only there (listeners' callbacks hop to `loop` first).
    static let maxListeners = 16
    static let maxConnections = 256

    let loop: any EventLoop
    /// By key (``key(_:_:)``): a listener asked for port 0 is filed under both that and the
    /// port it got (a cancel names either), so the keys outnumber the listeners.
    private var listeners: [String: any Channel] = [:]
    /// Binds under way, which count against ``maxListeners`` too.
    private var binding = 0
    private var open = 0
    private var closed = false

    /// `--block-reverse-port-forwarding`: every request fails.
    let refused: Bool

    /// The connection's rekey gate: replies and forwards wait for a key exchange under way.
    private let gate: SSHRekeyGate

    init(loop: any EventLoop, refused: Bool = false, gate: SSHRekeyGate) {
        self.loop = loop
        self.refused = refused
        self.gate = gate
    }

    func tcpForwardingRequest(
        _ request: GlobalRequest.TCPForwardingRequest, handler: NIOSSHHandler,
        promise reply: EventLoopPromise<GlobalRequest.TCPForwardingResponse>
    ) {
        loop.preconditionInEventLoop()
        // swift-nio-ssh writes a reply when it comes, and a reply mid key exchange ends the
        // connection: a bind that finishes then is answered after the exchange.
        let promise = loop.makePromise(of: GlobalRequest.TCPForwardingResponse.self)
        reply.completeWith(gate.afterOpen(promise.futureResult))
        switch request {
        case .listen(SSHExtensionMarker.keepalive, _):
            // `keepalive@openssh.com`, answered (the reference refuses it).
            promise.succeed(.init(boundPort: nil))
        case .listen(let host, _) where SSHExtensionMarker.streamLocalPath(host) != nil:
            guard !refused else {
                promise.fail(ReverseForwardingError.disabled)
                return
            }
            guard listeners[Self.key(host, 0)] == nil else {
                // The same path again on this connection: success, nothing new.
                promise.succeed(.init(boundPort: nil))
                return
            }
            guard !closed, listenerCount < Self.maxListeners else {
                promise.fail(ReverseForwardingError.tooManyListeners)
                return
            }
            listenUnix(marked: host, path: SSHExtensionMarker.streamLocalPath(host)!, handler: NIOLoopBound(handler, eventLoop: loop), promise: promise)
        case .cancel(let host, _) where SSHExtensionMarker.streamLocalPath(host) != nil:
            remove(listenerAt: Self.key(host, 0))
            promise.succeed(.init(boundPort: nil))
        case .listen(let host, let port):
            guard !refused else {
                promise.fail(ReverseForwardingError.disabled)
                return
            }
            // A marked host that is no stream-local one (a path with a NUL): never a TCP host.
            guard !SSHExtensionMarker.isMarked(host) else {
                promise.fail(ReverseForwardingError.invalidPath)
                return
            }
            // A client's uint32: outside TCP's range is refused before any bind.
            guard (0...65535).contains(port) else {
                promise.fail(ReverseForwardingError.invalidPort)
                return
            }
            guard !closed, listenerCount < Self.maxListeners else {
                promise.fail(ReverseForwardingError.tooManyListeners)
                return
            }
            listen(host: host, port: port, handler: NIOLoopBound(handler, eventLoop: loop), promise: promise)
        case .cancel(let host, let port):
            remove(listenerAt: Self.key(host, port))
            promise.succeed(.init(boundPort: nil))
        }
    }

    /// Listeners open or being bound, each once (the cap counts these, not keys: a port-0
    /// listener's two keys made the 16-listener cap grant fewer).
    private var listenerCount: Int {
        Set(listeners.values.map { ObjectIdentifier($0) }).count + binding
    }

    /// Where `host` listens: every interface when empty, a literal as it is, `localhost` as
    /// 127.0.0.1 (Go's `net.Listen` takes its IPv4 address; a lookup often gives ::1 first),
    /// any other name looked up on NIO's thread pool, IPv4 first: never a blocking lookup on
    /// the loop, which may be the tailnet's only one.
    static func bindAddress(_ host: String, port: Int, on loop: any EventLoop) -> EventLoopFuture<SocketAddress> {
        let name = host.isEmpty ? "0.0.0.0" : host == "localhost" ? "127.0.0.1" : host
        if let literal = try? SocketAddress(ipAddress: name, port: port) { return loop.makeSucceededFuture(literal) }
        return NIOThreadPool.singleton.runIfActive(eventLoop: loop) {
            let found = HostLookup.firstAddresses(of: name, datagram: false)
            guard let numeric = found.ipv4 ?? found.ipv6 else { throw ReverseForwardingError.unknownHost }
            return try SocketAddress(ipAddress: numeric, port: port)
        }
    }

    /// Closes the listener filed under `key` and forgets every key it is filed under.
    private func remove(listenerAt key: String) {
        guard let listener = listeners[key] else { return }
        let id = ObjectIdentifier(listener)
        listeners = listeners.filter { ObjectIdentifier($0.value) != id }
        listener.close(promise: nil)
    }

    private func listen(
        host: String, port: Int, handler: NIOLoopBound<NIOSSHHandler>, promise: EventLoopPromise<GlobalRequest.TCPForwardingResponse>
    ) {
        let bound = NIOLoopBound(self, eventLoop: loop)
        binding += 1
        let loop = self.loop
        Self.bindAddress(host, port: port, on: loop).flatMap { address in
            ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.autoRead, value: false)
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer { accepted in
                    accepted.eventLoop.makeCompletedFuture {
                        bound.value.forward(accepted, host: host, handler: handler)
                    }
                }
                .bind(to: address)
        }
        .whenComplete { result in
            let this = bound.value
            this.binding -= 1
            switch result {
            case .success(let listener):
                let actual = listener.localAddress?.port ?? port
                if this.closed {
                    listener.close(promise: nil)
                    promise.fail(ReverseForwardingError.closed)
                    return
                }
                this.listeners[Self.key(host, port)] = listener
                if port != actual { this.listeners[Self.key(host, actual)] = listener }
                promise.succeed(.init(boundPort: port == 0 ? actual : nil))
            case .failure(let error):
                promise.fail(error)
            }
        }
    }

    /// `ssh -R` to a Unix socket (`streamlocal-forward@openssh.com`): made with the agent's
    /// socket lifecycle (``SocketFile``: parent directory made 0700, mode 0600 before it
    /// appears, a stale socket replaced, a live one or a non-socket refused where the
    /// reference unlinks whatever is there), removed when the listener closes if it is still
    /// the same file.
    private func listenUnix(
        marked: String, path: String, handler: NIOLoopBound<NIOSSHHandler>, promise: EventLoopPromise<GlobalRequest.TCPForwardingResponse>
    ) {
        let bound = NIOLoopBound(self, eventLoop: loop)
        let file = SocketFile(path: path, mode: 0o600, stalePolicy: .socketOnly)
        let staged: SocketFile.Staging
        do {
            staged = try file.makeStaging()
        } catch {
            promise.fail(error)
            return
        }
        binding += 1
        ServerBootstrap(group: loop)
            .childChannelOption(.autoRead, value: false)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { accepted in
                accepted.eventLoop.makeCompletedFuture {
                    bound.value.forward(accepted, host: marked, handler: handler)
                }
            }
            .bind(unixDomainSocketPath: staged.socket)
            .whenComplete { result in
                let this = bound.value
                this.binding -= 1
                switch result {
                case .success(let listener):
                    let identity: SocketFile.Identity
                    do {
                        identity = try file.install(staged: staged)
                    } catch {
                        listener.close(promise: nil)
                        promise.fail(error)
                        return
                    }
                    listener.closeFuture.whenComplete { _ in file.remove(ifStill: identity) }
                    if this.closed {
                        listener.close(promise: nil)
                        promise.fail(ReverseForwardingError.closed)
                        return
                    }
                    this.listeners[Self.key(marked, 0)] = listener
                    promise.succeed(.init(boundPort: nil))
                case .failure(let error):
                    unlink(staged.socket)
                    rmdir(staged.directory)
                    promise.fail(error)
                }
            }
    }

    /// Opens a `forwarded-tcpip` channel for `accepted` and joins the two once it is open.
    private func forward(_ accepted: any Channel, host: String, handler: NIOLoopBound<NIOSSHHandler>) {
        guard !closed, open < Self.maxConnections else {
            accepted.close(promise: nil)
            return
        }
        open += 1
        let bound = NIOLoopBound(self, eventLoop: loop)
        accepted.closeFuture.whenComplete { _ in bound.value.open -= 1 }
        let listeningPort = accepted.localAddress?.port ?? 0
        // A Unix socket's peer has no address the channel could name: 0.0.0.0:0 (the
        // rewriter sends `forwarded-streamlocal@openssh.com`, which carries none).
        guard let origin = SSHExtensionMarker.isMarked(host) ? try? SocketAddress(ipAddress: "0.0.0.0", port: 0) : accepted.remoteAddress else {
            accepted.close(promise: nil)
            return
        }
        ChannelGlue.forwardToClient(
            accepted, through: handler.value, gate: gate,
            as: .forwardedTCPIP(.init(listeningHost: host, listeningPort: listeningPort, originatorAddress: origin)))
    }

    /// Closes every listener (the SSH connection ended).
    func closeAll() {
        loop.execute { [self] in
            closed = true
            var seen = Set<ObjectIdentifier>()
            for listener in listeners.values where seen.insert(ObjectIdentifier(listener)).inserted {
                listener.close(promise: nil)
            }
            listeners = [:]
        }
    }

    static func key(_ host: String, _ port: Int) -> String { "\(host)|\(port)" }
}

enum ReverseForwardingError: Error {
    case disabled
    case invalidPort
    case invalidPath
    case tooManyListeners
    case closed
    /// The bind address names no host.
    case unknownHost
}
