import AgentTLS
import AgentTestSupport
import Foundation
import NIOCore
import NIOPosix
import Testing

/// TLS over real loopback sockets, against the handler itself and against curl.
@Suite(.timeLimit(.minutes(3)))
struct TLSHandlerSocketTests {
    /// A TLS server on 127.0.0.1 whose pipeline ends in `recorder`, with `cutter` below TLS.
    static func server(_ certificate: TestCertificate, recorder: TLSRecorder, cutter: SocketCutter? = nil) async throws -> any Channel {
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChainFile: certificate.certificate, privateKeyFile: certificate.key)
        configuration.applicationProtocols = ["http/1.1"]
        let context = try TLSContext(configuration: configuration)
        return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    if let cutter { try child.pipeline.syncOperations.addHandler(cutter) }
                    try child.pipeline.syncOperations.addHandler(TLSHandler(server: context))
                    try child.pipeline.syncOperations.addHandler(recorder)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    static func client(_ certificate: TestCertificate, port: Int, recorder: TLSRecorder) async throws -> any Channel {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(certificate.certificate)
        configuration.applicationProtocols = ["http/1.1"]
        let context = try TLSContext(configuration: configuration)
        return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(client: context, serverName: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(recorder)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
    }

    /// Waits (polling, bounded) for `done`.
    static func wait(_ what: String, _ done: () -> Bool) async {
        let deadline = ContinuousClock.now + .seconds(60)
        while !done() {
            if ContinuousClock.now > deadline {
                Issue.record("waited 60 s for \(what)")
                return
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// 4 MiB echoed through both ends' TLS, byte for byte, then a clean close.
    @Test func megabytesGoBothWaysAndTheCloseIsClean() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        let serverSeen = TLSRecorder(echo: true)
        let server = try await Self.server(certificate, recorder: serverSeen)
        let clientSeen = TLSRecorder()
        let client = try await Self.client(certificate, port: server.localAddress?.port ?? 0, recorder: clientSeen)
        var message = [UInt8](repeating: 0, count: 4 << 20)
        var random = SplitMix64(seed: 49)
        for index in message.indices { message[index] = UInt8(truncatingIfNeeded: random.next()) }
        // More than is held for the handshake: written once it is done.
        await Self.wait("the handshake") { !clientSeen.protocols.isEmpty }
        for start in stride(from: 0, to: message.count, by: 100_000) {
            client.write(ByteBuffer(bytes: message[start..<min(start + 100_000, message.count)]), promise: nil)
        }
        try await client.writeAndFlush(ByteBuffer()).get()
        await Self.wait("the echo") { clientSeen.count >= message.count }
        let echoed = clientSeen.bytes == message  // compared here: a failed #expect would diff 4 MiB
        #expect(echoed, "the echo differs (\(clientSeen.count) bytes)")
        #expect(clientSeen.protocols == ["http/1.1"])
        try await client.close()
        await Self.wait("the server's end") { serverSeen.inactive }
        #expect(serverSeen.errors.isEmpty, "the server read our close_notify: \(serverSeen.errors)")
        try await server.close()
    }

    /// A server that drops the connection after its answer, without close_notify: the client
    /// has the answer, then ``TLSError/uncleanShutdown``.
    @Test func aDroppedConnectionIsUnclean() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        let cutter = SocketCutter()
        let serverSeen = TLSRecorder(echo: true)
        let server = try await Self.server(certificate, recorder: serverSeen, cutter: cutter)
        let clientSeen = TLSRecorder()
        let client = try await Self.client(certificate, port: server.localAddress?.port ?? 0, recorder: clientSeen)
        try await client.writeAndFlush(ByteBuffer(string: "ping")).get()
        await Self.wait("the echo") { clientSeen.count >= 4 }
        cutter.cut()
        await Self.wait("the client's end") { clientSeen.inactive }
        #expect(String(decoding: clientSeen.bytes, as: UTF8.self) == "ping")
        #expect(clientSeen.errors.contains { $0 as? TLSError == .uncleanShutdown }, "\(clientSeen.errors)")
        try await server.close()
    }

    /// curl (its own TLS client) fetches from the handler's server, the certificate checked.
    @Test func curlTalksToTheServer() async throws {
        let certificate = try await TestCertificate.make(names: "DNS:localhost")
        defer { certificate.remove() }
        let serverSeen = TLSRecorder(answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
        let server = try await Self.server(certificate, recorder: serverSeen)
        let port = server.localAddress?.port ?? 0
        let outcome = await ChildProgram.run(
            [
                "curl", "-sS", "--http1.1", "--max-time", "60", "--cacert", certificate.certificate, "--resolve",
                "localhost:\(port):127.0.0.1", "https://localhost:\(port)/hello",
            ], stderrToStdout: true)
        #expect(outcome.status == 0, "\(outcome.stdout)")
        #expect(outcome.stdout == "hello")
        #expect(String(decoding: serverSeen.bytes, as: UTF8.self).hasPrefix("GET /hello HTTP/1.1\r\n"))
        try await server.close()
    }
}
