import AgentTestSupport
import DERP
import DERPRelayDouble
import Foundation
import Logging
import Synchronization
import Testing

/// Shared helpers: a relay double around a test, clients that reconnect fast.
enum DERPTest {
    static let quiet = Logger(label: "derp-test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Reconnects within a few hundred milliseconds (tests), everything else as shipped.
    static var fast: DERPClient.Configuration {
        var configuration = DERPClient.Configuration()
        configuration.backoffFloor = .milliseconds(20)
        configuration.backoffCeiling = .milliseconds(300)
        return configuration
    }

    /// Runs `body` with a started relay (TLS when `tls`), stopping it afterwards.
    static func withRelay<T: Sendable>(tls: Bool = false, _ body: (DERPRelayDouble) async throws -> T) async throws -> T {
        let relay = DERPRelayDouble(certificate: tls ? try await makeCertificate() : nil)
        // Below the ephemeral range: a client redialing a stopped relay cannot connect to
        // itself on this port (AgentTestSupport's freeLoopbackPort).
        try await relay.start(port: freeLoopbackPort())
        do {
            let result = try await body(relay)
            await relay.stop()
            return result
        } catch {
            await relay.stop()
            throw error
        }
    }

    /// A fresh self-signed certificate in a temporary directory (the `openssl` CLI).
    static func makeCertificate() async throws -> SelfSignedCertificate {
        let directory = NSTemporaryDirectory() + "derp-cert-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = SelfSignedCertificate(directory: directory)
        let outcome = await ChildProgram.run(certificate.opensslArguments)
        guard outcome.status == 0 else { throw CertificateFailure(status: outcome.status) }
        return certificate
    }

    struct CertificateFailure: Error {
        var status: Int32
    }

    /// A started client of `node`, returned once the relay lists its key.
    static func client(
        _ relay: DERPRelayDouble, node: DERPNode? = nil, configuration: DERPClient.Configuration = fast,
        key: X25519PrivateKey = .generate(), packetHandler: (@Sendable (DERPReceivedPacket) -> Void)? = nil
    ) async -> DERPClient {
        let client = DERPClient(
            privateKey: key, node: node ?? relay.node(), configuration: configuration, logger: quiet, packetHandler: packetHandler)
        client.start()
        if await !connected(client, relay) {
            Issue.record("not connected: \(client.state.lastError ?? "no error")")
        }
        return client
    }

    /// True once `client` is connected and the relay lists it (generous: under a loaded CI
    /// host, with the whole suite starting at once, a TLS dial can take seconds).
    static func connected(_ client: DERPClient, _ relay: DERPRelayDouble) async -> Bool {
        await eventually(timeout: .seconds(90)) {
            client.state.phase == .connected && relay.connectedKeys.contains(client.publicKey)
        }
    }

    /// Sends `packet` from `sender` until `inbox` holds it (the first packet after a
    /// connect may be lost by design); at most 100 tries, 100 ms apart.
    static func deliver(_ packet: [UInt8], from sender: DERPClient, to receiver: DERPClient, inbox: PacketCollector) async -> Bool {
        let expected = DERPReceivedPacket(source: sender.publicKey, packet: packet)
        for _ in 0..<100 {
            sender.send(to: receiver.publicKey, packet: packet)
            if await eventually(timeout: .milliseconds(100), { inbox.packets.contains(expected) }) { return true }
        }
        return false
    }
}

/// Collects what a client's packet handler receives (on its event loop).
final class PacketCollector: Sendable {
    private let received = Mutex<[DERPReceivedPacket]>([])

    var packets: [DERPReceivedPacket] { received.withLock { $0 } }

    var handler: @Sendable (DERPReceivedPacket) -> Void {
        { packet in self.received.withLock { $0.append(packet) } }
    }
}
