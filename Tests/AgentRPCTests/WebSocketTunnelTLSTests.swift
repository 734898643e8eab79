import AgentRPC
import AgentTestSupport
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import OutboundProxy
import Synchronization
import Testing

/// The control plane's `wss://` dial through a proxy that stands in for every server
/// (``StandInProxy``): the TLS server's certificate must name the control plane. One that
/// names only the proxy's address (127.0.0.1, which NIOSSL accepts as the connected address)
/// fails the dial before the upgrade, with the session token, is written.
@Suite(.timeLimit(.minutes(3)))
struct WebSocketTunnelTLSTests {
    /// A TLS server that keeps what it reads in plain text and answers the first request
    /// head with 403.
    final class TLSServer: Sendable {
        /// What the server read, in plain text.
        final class Received: Sendable {
            let bytes = Mutex<[UInt8]>([])
        }

        let channel: any Channel
        let received: Received

        private init(channel: any Channel, received: Received) {
            self.channel = channel
            self.received = received
        }

        var port: Int { channel.localAddress?.port ?? 0 }
        var text: String { String(decoding: received.bytes.withLock { $0 }, as: UTF8.self) }

        static func start(certificate: String, key: String) async throws -> TLSServer {
            let configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            let context = try NIOSSLContext(configuration: configuration)
            let received = Received()
            let recorder = Recorder(received: received)
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .childChannelInitializer { child in
                    child.eventLoop.makeCompletedFuture {
                        try child.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                        try child.pipeline.syncOperations.addHandler(recorder)
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
            return TLSServer(channel: channel, received: received)
        }

        func stop() async { try? await channel.close() }

        final class Recorder: ChannelInboundHandler, Sendable {
            typealias InboundIn = ByteBuffer
            typealias OutboundOut = ByteBuffer
            let received: Received
            init(received: Received) { self.received = received }

            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                let bytes = Array(unwrapInboundIn(data).readableBytesView)
                let complete = received.bytes.withLock { all -> Bool in
                    all += bytes
                    return String(decoding: all, as: UTF8.self).contains("\r\n\r\n")
                }
                if complete {
                    let answer = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer)), promise: nil)
                }
            }

            func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
        }
    }

    /// A throwaway certificate for `names`, its key, and their directory (removed by the caller).
    static func certificate(_ names: String) async throws -> (certificate: String, key: String, directory: String) {
        let directory = NSTemporaryDirectory() + "wss-tunnel-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var made = false
        defer { if !made { try? FileManager.default.removeItem(atPath: directory) } }
        let outcome = await ChildProgram.run([
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "1", "-subj", "/CN=test",
            "-addext", "subjectAltName=\(names)",
        ])
        try #require(outcome.status == 0, "openssl: \(outcome.stdout)")
        made = true
        return (directory + "/cert.pem", directory + "/key.pem", directory)
    }

    @Test(arguments: [("DNS:coder.example.test", true), ("IP:127.0.0.1,DNS:other.example.test", false)])
    func theCertificateMustNameTheControlPlane(names: String, valid: Bool) async throws {
        let (certificate, key, directory) = try await Self.certificate(names)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await TLSServer.start(certificate: certificate, key: key)
        guard let proxy = await StandInProxy.start(relayingTo: server.port) else {
            await server.stop()
            Issue.record("the stand-in proxy did not start")
            return
        }
        defer { proxy.stop() }
        var trusting = TLSConfiguration.makeClientConfiguration()
        trusting.trustRoots = .file(certificate)
        do {
            _ = try await WebSocketConnector.connect(
                url: "wss://coder.example.test/api/v2/workspaceagents/me/rpc", headers: [("Coder-Session-Token", "the-token")],
                proxies: ProxyEnvironment(environment: ["HTTPS_PROXY": proxy.url]), tlsConfiguration: trusting
            ) { _ in 0 }
            Issue.record("the dial succeeded")
        } catch {
            if valid {
                #expect(error as? DialError == .refused(status: 403, message: ""), "\(error)")
                #expect(server.text.hasPrefix("GET /api/v2/workspaceagents/me/rpc HTTP/1.1\r\n"), "\(server.text)")
            } else {
                #expect("\(error)".contains("not valid for coder.example.test"), "\(error)")
                #expect(server.text.isEmpty, "nothing, the token least of all, is written before the check")
            }
        }
        await server.stop()
    }
}
