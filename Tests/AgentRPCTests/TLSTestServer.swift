import AgentTLS
import AgentTestSupport
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A TLS (or plain) server on 127.0.0.1 that keeps what it reads in plain text and, once a request's
/// head and its `Content-Length` body have arrived, writes `answer` (nil: says nothing) and,
/// if asked, closes.
final class TLSTestServer: Sendable {
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

    static func start(certificate: String, key: String, answer: [UInt8]?, close: Bool = false) async throws -> TLSTestServer {
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChainFile: certificate, privateKeyFile: key)
        return try await start(context: TLSContext(configuration: configuration), answer: answer, close: close)
    }

    /// The same server in plain text (no TLS): an http target.
    static func startPlain(answer: [UInt8]?, close: Bool = false) async throws -> TLSTestServer {
        try await start(context: nil, answer: answer, close: close)
    }

    private static func start(context: TLSContext?, answer: [UInt8]?, close: Bool) async throws -> TLSTestServer {
        let received = Received()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    if let context { try child.pipeline.syncOperations.addHandler(TLSHandler(server: context)) }
                    try child.pipeline.syncOperations.addHandler(Recorder(received: received, answer: answer, close: close))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TLSTestServer(channel: channel, received: received)
    }

    func stop() async { try? await channel.close() }

    private final class Recorder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let received: Received
        let answer: [UInt8]?
        let close: Bool
        var answered = false

        init(received: Received, answer: [UInt8]?, close: Bool) {
            self.received = received
            self.answer = answer
            self.close = close
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = Array(unwrapInboundIn(data).readableBytesView)
            let all = received.bytes.withLock { all -> [UInt8] in
                all += bytes
                return all
            }
            guard !answered, let answer, Self.isWhole(all) else { return }
            answered = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: answer))).whenComplete { [close] _ in
                if close { channel.close(promise: nil) }
            }
        }

        /// A head, and as many bytes after it as its `Content-Length` says.
        static func isWhole(_ bytes: [UInt8]) -> Bool {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { return false }
            let head = text[..<end.lowerBound].lowercased()
            let length =
                head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            return text.utf8.count - text[..<end.upperBound].utf8.count >= length
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    /// A server with a throwaway certificate for `names`, a client configuration that trusts
    /// it, and the certificate's directory (removed by the caller).
    static func startTrusted(
        names: String, answer: [UInt8]?, close: Bool = false
    ) async throws -> (server: TLSTestServer, trusting: TLSConfiguration, directory: String) {
        let (certificate, key, directory) = try await certificate(names)
        do {
            let server = try await start(certificate: certificate, key: key, answer: answer, close: close)
            var trusting = TLSConfiguration.makeClientConfiguration()
            trusting.trustRoots = .file(certificate)
            return (server, trusting, directory)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// An `https://` stand-in proxy relaying to `port`, with a throwaway certificate for
    /// `names`; `trusting` with that certificate trusted too; the certificate's directory
    /// (removed by the caller). `targetCertificate` is the file `trusting` trusts.
    static func httpsProxy(
        relayingTo port: Int, names: String, trusting: TLSConfiguration, targetCertificate: String
    ) async throws -> (proxy: StandInProxy, trusting: TLSConfiguration, directory: String) {
        let files = try await certificate(names)
        guard let proxy = await StandInProxy.start(relayingTo: port, tls: (files.certificate, files.key)) else {
            try? FileManager.default.removeItem(atPath: files.directory)
            throw TLSTestServerError.proxyDidNotStart
        }
        var both = trusting
        both.trustRoots = .pem(try pemBytes(targetCertificate) + pemBytes(files.certificate))
        return (proxy, both, files.directory)
    }

    /// A plain (http) server answering `answer` behind an `https://` stand-in proxy: `body`
    /// gets the server, the proxy and a configuration trusting the proxy's certificate; all
    /// are stopped and removed after it.
    static func withPlainServerBehindHTTPSProxy(
        answer: [UInt8], _ body: (TLSTestServer, StandInProxy, TLSConfiguration) async throws -> Void
    ) async throws {
        let server = try await startPlain(answer: answer)
        // No target certificate is used; ``httpsProxy`` trusts one beside the proxy's.
        let unused = try await certificate("DNS:unused.example.test")
        defer { try? FileManager.default.removeItem(atPath: unused.directory) }
        let (proxy, trusting, proxyDirectory) = try await httpsProxy(
            relayingTo: server.port, names: "IP:127.0.0.1", trusting: .makeClientConfiguration(), targetCertificate: unused.certificate)
        defer {
            proxy.stop()
            try? FileManager.default.removeItem(atPath: proxyDirectory)
        }
        do {
            try await body(server, proxy, trusting)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    enum TLSTestServerError: Error {
        case proxyDidNotStart
    }

    /// A throwaway certificate for `names`, its key, and their directory (removed by the caller).
    static func certificate(_ names: String) async throws -> (certificate: String, key: String, directory: String) {
        let made = try await TestCertificate.make(names: names, commonName: "test")
        return (made.certificate, made.key, made.directory)
    }
}

/// A PEM file's bytes, for trust roots made of several files.
func pemBytes(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else { throw TLSError.configuration("cannot read \(path)") }
    return Array(data)
}
