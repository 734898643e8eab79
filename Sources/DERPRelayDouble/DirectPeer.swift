import DERP
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The peer's side of direct paths, written for the tests from the disco byte tables: it
/// sits in front of wireguard-go (in the peer's namespace) on two UDP sockets — one on
/// loopback that wireguard-go sends to, one on the peer's LAN address that the agent reaches
/// directly — and a DERP client under the peer's key. It answers the agent's disco Pings
/// over UDP, pings the addresses of a CallMeMaybe, and sends wireguard-go's datagrams
/// straight to the agent while it heard from the agent over UDP in the last 5 s, over DERP
/// as well when not, over DERP alone before any direct contact. It counts WireGuard bytes
/// by path, so a test can tell which path carried a transfer. `answersPings` false keeps it
/// on DERP (a benchmark's relayed baseline).
public final class DirectPeer: Sendable {
    public struct Counters: Sendable, Equatable {
        public var udpIn = 0
        public var udpOut = 0
        public var derpIn = 0
        public var derpOut = 0
        /// Disco datagrams from the agent over UDP (pings, pongs).
        public var discoUDP = 0
        public var callMeMaybe = 0
    }

    struct State: Sendable {
        var agentEndpoint: DiscoEndpoint?
        var lastUDPFromAgent: ContinuousClock.Instant?
        var counters = Counters()
    }

    public let disco = X25519PrivateKey.generate()
    /// False: pings over UDP are not answered and CallMeMaybe not followed (DERP only).
    public let answersPings: Bool
    let fixedEndpoint: DiscoEndpoint?
    let loopback: Int32
    let lan: Int32
    let wireguardPort: UInt16
    let agentKey: X25519PublicKey
    let agentDisco: X25519PublicKey
    let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)
    private let derpBox = Mutex<DERPClient?>(nil)

    /// Trust in the direct path lasts this long after the agent was last heard over UDP.
    static let trust: Duration = .seconds(5)

    /// - Parameters:
    ///   - loopback: a UDP socket in the peer's namespace that wireguard-go's peer endpoint names.
    ///   - lan: a UDP socket on the peer's address that the agent reaches directly.
    ///   - fixedEndpoint: a path known in advance and always trusted (no disco): a benchmark
    ///     puts the same hop in front of a plain wireguard-go peer.
    public init(
        loopback: Int32, lan: Int32, wireguardPort: UInt16, agentKey: X25519PublicKey, agentDisco: X25519PublicKey, answersPings: Bool = true,
        fixedEndpoint: DiscoEndpoint? = nil
    ) {
        self.answersPings = answersPings
        self.fixedEndpoint = fixedEndpoint
        self.loopback = loopback
        self.lan = lan
        self.wireguardPort = wireguardPort
        self.agentKey = agentKey
        self.agentDisco = agentDisco
        state.withLock { $0.agentEndpoint = fixedEndpoint }
    }

    public var counters: Counters { state.withLock { $0.counters } }

    /// Connects to the relay under `key` (the peer's WireGuard key) and starts the two socket
    /// readers (threads, ended by ``stop()``).
    public func start(key: X25519PrivateKey, relay: DERPRelayDouble) {
        let derp = DERPClient(privateKey: key, node: relay.node(regionID: 1)) { [weak self] packet in
            self?.fromDERP(packet.packet)
        }
        derpBox.withLock { $0 = derp }
        derp.start()
        for (fd, handler) in [(loopback, fromWireGuard), (lan, fromLAN)] as [(Int32, @Sendable ([UInt8], DiscoEndpoint) -> Void)] {
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 65536)
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                while !stopping.load(ordering: .relaxed) {
                    guard poll(&poller, 1, 200) > 0 else { continue }
                    var source = sockaddr_storage()
                    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    let count = buffer.withUnsafeMutableBytes { bytes in
                        withUnsafeMutablePointer(to: &source) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, bytes.baseAddress, bytes.count, 0, $0, &length) }
                        }
                    }
                    guard count > 0, let endpoint = Self.endpoint(source) else { continue }
                    handler(Array(buffer[0..<count]), endpoint)
                }
            }.start()
        }
    }

    static func endpoint(_ storage: sockaddr_storage) -> DiscoEndpoint? {
        var storage = storage
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address -> DiscoEndpoint? in
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        DiscoEndpoint(raw: withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) }, port: UInt16(bigEndian: v4.pointee.sin_port))
                    }
                case AF_INET6:
                    return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        DiscoEndpoint(raw: withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) }, port: UInt16(bigEndian: v6.pointee.sin6_port))
                    }
                default:
                    return nil
                }
            }
        }
    }

    public func stop() async {
        stopping.store(true, ordering: .relaxed)
        if let derp = derpBox.withLock({ $0 }) { await derp.close() }
        try? await Task.sleep(for: .milliseconds(300))
        close(loopback)
        close(lan)
    }

    // MARK: Paths

    /// wireguard-go → the agent: direct while trusted, both ways when not, DERP before any contact.
    private func fromWireGuard(_ datagram: [UInt8], _ source: DiscoEndpoint) {
        let (endpoint, trusted) = state.withLock { s -> (DiscoEndpoint?, Bool) in
            let trusted = fixedEndpoint != nil || (s.lastUDPFromAgent.map { ContinuousClock.now - $0 < Self.trust } ?? false)
            if s.agentEndpoint != nil { s.counters.udpOut += datagram.count }
            if s.agentEndpoint == nil || !trusted { s.counters.derpOut += datagram.count }
            return (s.agentEndpoint, trusted)
        }
        if let endpoint { send(datagram, on: lan, to: endpoint) }
        if endpoint == nil || !trusted { _ = derpBox.withLock { $0 }?.send(to: agentKey, packet: datagram) }
    }

    /// The LAN socket: disco from the agent, else WireGuard for wireguard-go.
    private func fromLAN(_ datagram: [UInt8], _ source: DiscoEndpoint) {
        if Disco.looksLikeDisco(datagram) {
            guard answersPings, let received = try? Disco.open(datagram, privateKey: disco), received.sender == agentDisco else { return }
            state.withLock { s in
                s.counters.discoUDP += 1
                s.agentEndpoint = source
                s.lastUDPFromAgent = .now
            }
            if case .ping(let txID, _) = received.message {
                if let pong = Disco.seal(.pong(txID: txID, address: source.address, port: source.port), privateKey: disco, to: agentDisco) {
                    send(pong, on: lan, to: source)
                }
            }
            return
        }
        state.withLock { s in
            s.counters.udpIn += datagram.count
            s.lastUDPFromAgent = .now
        }
        toWireGuard(datagram)
    }

    /// The relay: disco (CallMeMaybe: ping every endpoint; Ping: Pong over DERP), else WireGuard.
    private func fromDERP(_ packet: [UInt8]) {
        if Disco.looksLikeDisco(packet) {
            guard let received = try? Disco.open(packet, privateKey: disco) else { return }
            switch received.message {
            case .callMeMaybe(let endpoints):
                state.withLock { $0.counters.callMeMaybe += 1 }
                guard answersPings else { return }
                for endpoint in endpoints {
                    let txID = (0..<12).map { _ in UInt8.random(in: 0...255) }
                    if let ping = Disco.seal(.ping(txID: txID, nodeKey: nil), privateKey: disco, to: agentDisco) { send(ping, on: lan, to: endpoint) }
                }
            case .ping:
                if let pong = Disco.pong(answering: received, privateKey: disco, regionID: 1) {
                    _ = derpBox.withLock { $0 }?.send(to: agentKey, packet: pong)
                }
            case .pong:
                break
            }
            return
        }
        state.withLock { $0.counters.derpIn += packet.count }
        toWireGuard(packet)
    }

    private func toWireGuard(_ datagram: [UInt8]) {
        send(datagram, on: loopback, to: DiscoEndpoint.ipv4Mapped(127, 0, 0, 1, port: wireguardPort))
    }

    /// A datagram to `endpoint` (IPv4 or IPv6; a socket of the other family fails silently).
    private func send(_ datagram: [UInt8], on fd: Int32, to endpoint: DiscoEndpoint) {
        if let v4 = endpoint.ipv4 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = endpoint.port.bigEndian
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: v4) }
            _ = datagram.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            return
        }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = endpoint.port.bigEndian
        withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: endpoint.address) }
        _ = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }
}
