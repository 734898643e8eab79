import AgentTLS
import DERP
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// What the double saw of one client's ClientInfo.
public struct ClientInfoRecord: Equatable, Sendable {
    /// The client's public key.
    public var key: X25519PublicKey
    /// The frame's payload length (104 for the Go client's info).
    public var frameLength: Int
    /// The JSON the box opened to.
    public var json: String

    /// A record (tests compare against one).
    public init(key: X25519PublicKey, frameLength: Int, json: String) {
        self.key = key
        self.frameLength = frameLength
        self.json = json
    }
}

/// A real DERP relay for tests, speaking the wire format on loopback:
/// plain HTTP or TLS (a self-signed certificate), `Upgrade: DERP` and WebSocket (subprotocol
/// `derp` required). It relays SendPacket to the client with that key (as RecvPacket with
/// the source key), drops packets for absent keys, tells the clients a leaving client had
/// sent to with PeerGone (reason 0), answers Pings.
///
/// For hostile and failure tests it can refuse the Upgrade with 400 (forcing WebSocket) or
/// answer 503 a number of times, greet with any bytes, inject raw bytes into a client's
/// connection, stop reading from a client, drop connections, and stop and start again on
/// the same port. A test acts as a client with ``DERPClient`` against ``node``.
///
/// Bounds: at most ``maxQueuedPackets`` frames queued per client (more are dropped and
/// counted); request heads up to 16 KiB; WebSocket messages up to 2 MiB.
public final class DERPRelayDouble: Sendable {
    /// Per-client queue of frames not yet written (the Go server's 512).
    public static let maxQueuedPackets = 512

    /// Whether to serve TLS, and with which certificate.
    public let certificate: SelfSignedCertificate?
    /// The relay's own key.
    public let serverKey: X25519PrivateKey
    /// Everything the double saw.
    public let recorded = Mutex(Recorded())
    /// When set, sent instead of the ServerKey frame to every new connection (raw bytes).
    public let greeting = Mutex<[UInt8]?>(nil)
    /// When true, `Upgrade: DERP` is answered 400 `Invalid "Upgrade" header: DERP`, as
    /// coderd's test relay that forces WebSocket.
    public let refuseUpgrade = Mutex(false)
    /// This many upgrade requests (DERP or WebSocket) are answered 503 first.
    public let failNextUpgrades = Mutex(0)

    private let state = Mutex(State())

    /// Requests, handshakes and relaying as the double saw them.
    public struct Recorded: Sendable {
        /// Every request head, in order.
        public var requests: [String] = []
        /// Every ClientInfo that opened.
        public var clientInfos: [ClientInfoRecord] = []
        /// Connections upgraded with `Upgrade: DERP`.
        public var upgradeConnections = 0
        /// Connections upgraded to a WebSocket.
        public var webSocketConnections = 0
        /// Statuses of refused upgrades (400, 503), in order.
        public var refusals: [Int] = []
        /// The last NotePreferred of each client.
        public var notePreferred: [X25519PublicKey: Bool] = [:]
        /// Pong payloads received.
        public var pongs: [[UInt8]] = []
        /// Packets relayed.
        public var relayed = 0
        /// Packets for keys not connected.
        public var droppedAbsent = 0
        /// Packets dropped because the destination's queue was full.
        public var droppedQueueFull = 0
    }

    private struct State {
        var listener: (any Channel)?
        var port = 0
        var peers: [X25519PublicKey: RelayPeer] = [:]
        /// For each key, the keys it sent to (told with PeerGone when it leaves).
        var sentTo: [X25519PublicKey: Set<X25519PublicKey>] = [:]
        var channels: [ObjectIdentifier: any Channel] = [:]
    }

    /// - Parameter certificate: serve TLS with it (nil: plain HTTP).
    public init(certificate: SelfSignedCertificate? = nil, serverKey: X25519PrivateKey = .generate()) {
        self.certificate = certificate
        self.serverKey = serverKey
    }

    /// The port listened on (0 before the first start).
    public var port: Int { state.withLock { $0.port } }

    /// A node description for this relay: region `regionID`, `127.0.0.1`, IPv6 `none`,
    /// plain HTTP or TLS without verification.
    public func node(regionID: Int = 1, name: String = "t2") -> DERPNode {
        DERPNode(
            name: name, regionID: regionID, hostName: "localhost", ipv4: "127.0.0.1", ipv6: "none", derpPort: port,
            forceHTTP: certificate == nil, insecureForTests: certificate != nil)
    }

    /// The keys of the clients connected now.
    public var connectedKeys: Set<X25519PublicKey> { state.withLock { Set($0.peers.keys) } }

    // MARK: Running

    /// Listens on 127.0.0.1:`port` (0: an ephemeral port; after a stop, the same port as
    /// before). A port still in use is retried for up to 5 s.
    public func start(port requested: Int? = nil) async throws {
        let sslContext = try certificate.map { cert in
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChainFile: cert.certificatePath, privateKeyFile: cert.keyPath)
            configuration.applicationProtocols = ["http/1.1"]
            return try TLSContext(configuration: configuration)
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    track(channel)
                    if let sslContext { try channel.pipeline.syncOperations.addHandler(TLSHandler(server: sslContext)) }
                    try channel.pipeline.syncOperations.addHandler(RelayHTTPHandler(relay: self))
                }
            }
        let port = requested ?? self.port
        var attempts = 0
        let listener: any Channel
        // Bounded: 100 tries, 50 ms apart.
        while true {
            do {
                listener = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
                break
            } catch let error as IOError where error.errnoCode == EADDRINUSE && port != 0 && attempts < 100 {
                attempts += 1
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        state.withLock {
            $0.listener = listener
            $0.port = listener.localAddress?.port ?? 0
        }
    }

    /// Closes the listener and every connection (clients see the relay die).
    public func stop() async {
        let (listener, channels) = state.withLock { s -> ((any Channel)?, [any Channel]) in
            defer {
                s.listener = nil
                s.channels = [:]
            }
            return (s.listener, Array(s.channels.values))
        }
        try? await listener?.close()
        for channel in channels { try? await channel.close() }
    }

    /// Closes every client connection; the listener stays.
    public func dropConnections() {
        for channel in state.withLock({ Array($0.channels.values) }) { channel.close(promise: nil) }
    }

    /// Closes the connection of the client with `key`; false if it is not connected.
    @discardableResult
    public func disconnect(_ key: X25519PublicKey) -> Bool {
        guard let peer = state.withLock({ $0.peers[key] }) else { return false }
        peer.channel.close(promise: nil)
        return true
    }

    /// Writes raw bytes (frames, or garbage) to the client with `key` (inside a binary
    /// message on WebSocket); false if it is not connected.
    @discardableResult
    public func inject(_ bytes: [UInt8], to key: X25519PublicKey) -> Bool {
        guard let peer = state.withLock({ $0.peers[key] }) else { return false }
        return peer.write(bytes, bounded: false)
    }

    /// Sends `frame` to the client with `key`.
    @discardableResult
    public func send(_ frame: DERPFrame, to key: X25519PublicKey) -> Bool { inject(frame.encoded, to: key) }

    /// Stops (or resumes) reading from the client with `key`: a client whose writes the
    /// relay never takes.
    @discardableResult
    public func setReading(_ reading: Bool, from key: X25519PublicKey) -> Bool {
        guard let peer = state.withLock({ $0.peers[key] }) else { return false }
        peer.channel.setOption(.autoRead, value: reading).whenComplete { _ in
            if reading { peer.channel.read() }
        }
        return true
    }

    // MARK: Relaying (called by the connection handlers)

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { $0.channels[id] = channel }
        channel.closeFuture.whenComplete { _ in _ = self.state.withLock { $0.channels.removeValue(forKey: id) } }
    }

    /// The 400 or 503 the next `Upgrade: DERP` gets, if any.
    func nextRefusal() -> (status: String, body: String)? {
        if refuseUpgrade.withLock({ $0 }) {
            recorded.withLock { $0.refusals.append(400) }
            return ("400 Bad Request", #"Invalid "Upgrade" header: DERP"#)
        }
        return nextFailure()
    }

    /// The 503 the next upgrade gets, while ``failNextUpgrades`` lasts.
    func nextFailure() -> (status: String, body: String)? {
        let fail = failNextUpgrades.withLock { n -> Bool in
            guard n > 0 else { return false }
            n -= 1
            return true
        }
        guard fail else { return nil }
        recorded.withLock { $0.refusals.append(503) }
        return ("503 Service Unavailable", "relay unavailable")
    }

    /// Last one wins for a key, as the Go server by default.
    func register(_ peer: RelayPeer) {
        state.withLock { $0.peers[peer.key] = peer }
    }

    func unregister(_ peer: RelayPeer) {
        let notify = state.withLock { s -> [RelayPeer] in
            guard s.peers[peer.key] === peer else { return [] }
            s.peers[peer.key] = nil
            let receivers = s.sentTo.removeValue(forKey: peer.key) ?? []
            return receivers.compactMap { s.peers[$0] }
        }
        for other in notify { other.write(DERPFrame.peerGone(peer.key, reason: 0).encoded) }
    }

    func forward(from source: RelayPeer, to destination: X25519PublicKey, packet: [UInt8]) {
        let target = state.withLock { s -> RelayPeer? in
            guard let target = s.peers[destination] else { return nil }
            s.sentTo[source.key, default: []].insert(destination)
            return target
        }
        guard let target else {
            recorded.withLock { $0.droppedAbsent += 1 }
            return
        }
        if target.write(DERPFrame.recvPacket(source: source.key, packet: packet).encoded) {
            recorded.withLock { $0.relayed += 1 }
        } else {
            recorded.withLock { $0.droppedQueueFull += 1 }
        }
    }
}
