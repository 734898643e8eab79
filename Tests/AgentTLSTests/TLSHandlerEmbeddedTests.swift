import AgentTLS
import AgentTestSupport
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// The handler's rules on embedded channels: a client and a server whose records the test
/// carries across by hand, so every step is the test's.
@Suite(.timeLimit(.minutes(2)))
struct TLSHandlerEmbeddedTests {
    /// A client and a server pipeline, active, with their recorders; the client's context
    /// trusts the server's certificate.
    struct Pair {
        let client: EmbeddedChannel
        let server: EmbeddedChannel
        let clientSeen = TLSRecorder()
        let serverSeen: TLSRecorder

        init(certificate: TestCertificate, verifyPeer: TLSHandler.PeerCheck? = nil, echo: Bool = false, alpn: [String] = ["http/1.1"]) throws {
            var serverConfiguration = TLSConfiguration.makeServerConfiguration(
                certificateChainFile: certificate.certificate, privateKeyFile: certificate.key)
            serverConfiguration.applicationProtocols = alpn
            var clientConfiguration = TLSConfiguration.makeClientConfiguration()
            clientConfiguration.trustRoots = .file(certificate.certificate)
            clientConfiguration.applicationProtocols = ["h2", "http/1.1"]
            serverSeen = TLSRecorder(echo: echo)
            server = EmbeddedChannel(handlers: [try TLSHandler(server: TLSContext(configuration: serverConfiguration)), serverSeen])
            client = EmbeddedChannel(handlers: [
                try TLSHandler(client: TLSContext(configuration: clientConfiguration), serverName: "localhost", verifyPeer: verifyPeer),
                clientSeen,
            ])
        }

        func connect() throws {
            try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        }

        /// Carries records both ways until neither side has any to send (bounded: a
        /// handshake takes a few flights).
        func shuttle() throws {
            for _ in 0..<64 {
                var moved = false
                while let bytes = try client.readOutbound(as: ByteBuffer.self) {
                    moved = true
                    if server.isActive { try server.writeInbound(bytes) }
                }
                while let bytes = try server.readOutbound(as: ByteBuffer.self) {
                    moved = true
                    if client.isActive { try client.writeInbound(bytes) }
                }
                if !moved { return }
            }
            Issue.record("the records did not settle")
        }
    }

    @Test func aHandshakeNegotiatesALPNAndCarriesBytesBothWays() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost,IP:127.0.0.1")
        defer { certificate.remove() }
        try Self.aHandshakeNegotiatesALPNAndCarriesBytesBothWays(certificate)
    }

    static func aHandshakeNegotiatesALPNAndCarriesBytesBothWays(_ certificate: TestCertificate) throws {
        let pair = try Pair(certificate: certificate, echo: true)
        try pair.connect()
        try pair.shuttle()
        #expect(pair.clientSeen.protocols == ["http/1.1"])
        #expect(pair.serverSeen.protocols == ["http/1.1"])
        // More than a record's worth, so that it spans several.
        let message = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try pair.client.writeOutbound(ByteBuffer(bytes: message))
        try pair.shuttle()
        #expect(pair.serverSeen.bytes == message)
        #expect(pair.clientSeen.bytes == message, "the echo")
        #expect(pair.clientSeen.errors.isEmpty && pair.serverSeen.errors.isEmpty)
    }

    /// Plaintext written before the handshake leaves behind it, in order, and before what a
    /// handler writes on the handshake's event; past the bound a write fails and the others
    /// are kept.
    @Test func writesBeforeTheHandshakeAreHeldInOrderUpToTheBound() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        try Self.writesBeforeTheHandshakeAreHeldInOrderUpToTheBound(certificate)
    }

    static func writesBeforeTheHandshakeAreHeldInOrderUpToTheBound(_ certificate: TestCertificate) throws {
        let pair = try Pair(certificate: certificate)
        try pair.client.pipeline.syncOperations.addHandler(WriteOnHandshake(" third"), position: .before(pair.clientSeen))
        let first = pair.client.write(ByteBuffer(string: "first "))
        let second = pair.client.writeAndFlush(ByteBuffer(string: "second"))
        let tooMuch = pair.client.writeAndFlush(ByteBuffer(repeating: 0, count: TLSHandler.maxHeldPlaintext))
        #expect(throws: TLSError.tooMuchBeforeHandshake(limit: TLSHandler.maxHeldPlaintext)) { try tooMuch.wait() }
        try pair.connect()
        try pair.shuttle()
        try first.wait()
        try second.wait()
        #expect(String(decoding: pair.serverSeen.bytes, as: UTF8.self) == "first second third", "held writes, then the event's")
    }

    /// The peer check runs before anything written leaves: refused, the server reads no
    /// plaintext, the held write fails with the check's error.
    @Test func aRefusedPeerGetsNothing() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost,IP:127.0.0.1")
        defer { certificate.remove() }
        try Self.aRefusedPeerGetsNothing(certificate)
    }

    static func aRefusedPeerGetsNothing(_ certificate: TestCertificate) throws {
        struct Refused: Error, Equatable {}
        let names = NamesBox()
        let pair = try Pair(certificate: certificate) { seen in
            names.set(seen)
            return Refused()
        }
        let write = pair.client.writeAndFlush(ByteBuffer(string: "the token"))
        try pair.connect()
        try pair.shuttle()
        #expect(throws: Refused.self) { try write.wait() }
        #expect(pair.serverSeen.bytes.isEmpty)
        #expect(pair.clientSeen.errors.contains { $0 is Refused })
        #expect(!pair.client.isActive)
        #expect(
            names.get() == [
                SubjectAlternativeName(kind: .dnsName, contents: Array("localhost".utf8)),
                SubjectAlternativeName(kind: .ipAddress, contents: [127, 0, 0, 1]),
            ])
    }

    /// close_notify: the closer sends it, the other side reads it, answers and closes; no
    /// error on either side. An end without it is unclean.
    @Test func closeNotifyEndsCleanlyAndItsAbsenceDoesNot() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        try Self.closeNotifyEndsCleanlyAndItsAbsenceDoesNot(certificate)
    }

    static func closeNotifyEndsCleanlyAndItsAbsenceDoesNot(_ certificate: TestCertificate) throws {
        let clean = try Pair(certificate: certificate)
        try clean.connect()
        try clean.shuttle()
        try clean.server.writeAndFlush(ByteBuffer(string: "answer")).wait()
        try clean.server.close().wait()
        try clean.shuttle()
        #expect(String(decoding: clean.clientSeen.bytes, as: UTF8.self) == "answer")
        #expect(!clean.client.isActive, "the client closed on the server's close_notify")
        #expect(clean.clientSeen.errors.isEmpty, "\(clean.clientSeen.errors)")

        let dropped = try Pair(certificate: certificate)
        try dropped.connect()
        try dropped.shuttle()
        try dropped.server.writeAndFlush(ByteBuffer(string: "cut")).wait()
        try dropped.shuttle()
        dropped.client.pipeline.fireChannelInactive()
        #expect(String(decoding: dropped.clientSeen.bytes, as: UTF8.self) == "cut")
        #expect(dropped.clientSeen.errors.contains { $0 as? TLSError == .uncleanShutdown })
    }

    /// What is no TLS fails the handshake with OpenSSL's reason and closes the connection.
    @Test func plainTextToAServerFailsItsHandshake() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        try Self.plainTextToAServerFailsItsHandshake(certificate)
    }

    static func plainTextToAServerFailsItsHandshake(_ certificate: TestCertificate) throws {
        let pair = try Pair(certificate: certificate)
        try pair.connect()
        try pair.server.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(!pair.server.isActive)
        let errors = pair.serverSeen.errors
        #expect(errors.count == 1)
        guard case .handshakeFailed(let reason) = errors.first as? TLSError else {
            Issue.record("\(errors)")
            return
        }
        #expect(reason.contains("wrong version number") || reason.contains("http request"), "\(reason)")
    }

    /// A client trusting another certificate refuses the chain, with OpenSSL's reason.
    @Test func anUntrustedChainFailsTheHandshake() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        let other = try await TestCertificate.make(names: "DNS:localhost")
        defer {
            certificate.remove()
            other.remove()
        }
        try Self.anUntrustedChainFailsTheHandshake(certificate, other: other)
    }

    static func anUntrustedChainFailsTheHandshake(_ certificate: TestCertificate, other: TestCertificate) throws {
        var clientConfiguration = TLSConfiguration.makeClientConfiguration()
        clientConfiguration.trustRoots = .pem(other.pem)
        let seen = TLSRecorder()
        let client = EmbeddedChannel(handlers: [
            try TLSHandler(client: TLSContext(configuration: clientConfiguration), serverName: "localhost"), seen,
        ])
        let server = EmbeddedChannel(handlers: [
            try TLSHandler(
                server: TLSContext(
                    configuration: .makeServerConfiguration(certificateChainFile: certificate.certificate, privateKeyFile: certificate.key)))
        ])
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        for _ in 0..<8 {
            while let bytes = try client.readOutbound(as: ByteBuffer.self) { if server.isActive { _ = try? server.writeInbound(bytes) } }
            while let bytes = try server.readOutbound(as: ByteBuffer.self) { if client.isActive { try client.writeInbound(bytes) } }
        }
        #expect(!client.isActive)
        #expect(seen.errors.contains { "\($0)".contains("certificate verify failed") }, "\(seen.errors)")
        #expect(seen.protocols.isEmpty)
    }

    @Test func badConfigurationsSayWhy() throws {
        #expect(throws: TLSError.self) { try TLSContext(configuration: .makeServerConfiguration(certificateChainFile: "/nonexistent", privateKeyFile: "/nonexistent")) }
        var noRoots = TLSConfiguration.makeClientConfiguration()
        noRoots.trustRoots = .pem(Array("not a certificate".utf8))
        #expect(throws: TLSError.configuration("no certificate in the trust roots")) { try TLSContext(configuration: noRoots) }
        var emptyRoots = TLSConfiguration.makeClientConfiguration()
        emptyRoots.trustRoots = .pem([])
        #expect(throws: TLSError.configuration("no certificate in the trust roots"), "not the system's store") {
            try TLSContext(configuration: emptyRoots)
        }
        var emptyProtocol = TLSConfiguration.makeClientConfiguration()
        emptyProtocol.applicationProtocols = [""]
        #expect(throws: TLSError.self) { try TLSContext(configuration: emptyProtocol) }
        #expect(SubjectAlternativeName.names(pem: Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)) == nil)
    }
}

/// The names a peer check was given.
final class NamesBox: Sendable {
    private let names = Mutex<[SubjectAlternativeName]?>(nil)
    func set(_ value: [SubjectAlternativeName]?) { names.withLock { $0 = value } }
    func get() -> [SubjectAlternativeName]? { names.withLock { $0 } }
}
