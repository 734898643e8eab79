import AgentTLS
import ArgumentParser
import CAgentTLS
import Foundation
import NIOCore
import NIOPosix
import NIOTLS

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench tls`: AgentTLS's channel handler (client and server on NIO, loopback)
/// against the same OpenSSL on blocking sockets (each session's memory buffers pumped by
/// `send` and `recv` on a thread per side): a new connection with its handshake and one
/// byte each way, and 64 MiB one way. The ratio is what NIO and the handler add to OpenSSL's
/// own work. The two sides take turns connection by connection, and transfer by transfer.
struct TLSBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls", abstract: "TLS on NIO (AgentTLS) against the same OpenSSL on blocking sockets.")

    @Option(help: "Connections per side.") var connections = 300
    @Option(help: "Bytes per bulk transfer.") var bytes = 64 << 20
    @Option(help: "Bulk transfers per side.") var transfers = 4

    func run() async throws {
        let directory = NSTemporaryDirectory() + "agent-bench-tls-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let made = Bench.wait(
            Bench.spawn([
                "/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                "-out", certificate, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            ]))
        guard made == 0 else { throw ValidationError("openssl could not make a certificate") }
        var clientConfiguration = TLSConfiguration.makeClientConfiguration()
        clientConfiguration.trustRoots = .file(certificate)
        let clientContext = try TLSContext(configuration: clientConfiguration)
        let serverContext = try TLSContext(configuration: .makeServerConfiguration(certificateChainFile: certificate, privateKeyFile: key))
        let nio = try await NIOTLSServer.start(context: serverContext, bulk: bytes)
        let blocking = try BlockingTLSServer(certificate: certificate, key: key, bulk: bytes)
        defer { blocking.stop() }
        guard let rawClient = BlockingTLS.clientContext(trusting: certificate) else { throw ValidationError("no OpenSSL client context") }
        defer { agent_tls_context_free(rawClient) }

        print("agent-bench tls: \(connections) connections and \(transfers) transfers of \(Bench.mib(bytes)) per side, taking turns")
        for _ in 0..<20 {
            _ = try await NIOTLSClient.exchange(context: clientContext, port: nio.port)
            _ = BlockingTLS.exchange(context: rawClient, port: blocking.port)
        }
        var ours: [Double] = []
        var theirs: [Double] = []
        for _ in 0..<connections {
            var start = Bench.now()
            guard try await NIOTLSClient.exchange(context: clientContext, port: nio.port) else { throw ValidationError("the NIO exchange failed") }
            ours.append(Double(Bench.now() - start))
            start = Bench.now()
            guard BlockingTLS.exchange(context: rawClient, port: blocking.port) else { throw ValidationError("the blocking exchange failed") }
            theirs.append(Double(Bench.now() - start))
        }
        let (agent, baseline) = (Bench.median(ours), Bench.median(theirs))
        report(
            "new connection: handshake + 1 byte each way", value: Bench.format(agent), baseline: Bench.format(baseline),
            ratio: agent / baseline, goal: "<= 1.3x OpenSSL on blocking sockets", met: agent / baseline <= 1.3)

        var ourRates: [Double] = []
        var theirRates: [Double] = []
        for _ in 0..<transfers {
            var start = Bench.now()
            guard try await NIOTLSClient.bulk(context: clientContext, port: nio.port, bytes: bytes) else { throw ValidationError("the NIO transfer failed") }
            ourRates.append(Double(bytes) / 1_048_576 / (Double(Bench.now() - start) / 1e9))
            start = Bench.now()
            guard BlockingTLS.bulk(context: rawClient, port: blocking.port, bytes: bytes) else { throw ValidationError("the blocking transfer failed") }
            theirRates.append(Double(bytes) / 1_048_576 / (Double(Bench.now() - start) / 1e9))
        }
        let (rate, baselineRate) = (Bench.median(ourRates), Bench.median(theirRates))
        report(
            "bulk, client to server", value: String(format: "%.0f MiB/s", rate), baseline: String(format: "%.0f MiB/s", baselineRate),
            ratio: rate / baselineRate, goal: ">= 0.8x OpenSSL on blocking sockets", met: rate / baselineRate >= 0.8)
        try await nio.channel.close()
    }
}

/// A NIO server with AgentTLS: echoes a connection's first byte, or, for a bulk connection
/// (first byte `B`), answers one byte once `bulk` bytes have arrived.
private struct NIOTLSServer {
    let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }

    static func start(context: TLSContext, bulk: Int) async throws -> NIOTLSServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.addHandler(TLSHandler(server: context))
                    try child.pipeline.syncOperations.addHandler(Answerer(bulk: bulk))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return NIOTLSServer(channel: channel)
    }

    final class Answerer: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let bulk: Int
        var mode: UInt8?
        var received = 0

        init(bulk: Int) { self.bulk = bulk }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            if mode == nil { mode = buffer.getInteger(at: buffer.readerIndex) }
            received += buffer.readableBytes
            if mode != UInt8(ascii: "B") || received == bulk + 1 {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [1])), promise: nil)
            }
        }
    }
}

/// The NIO client's two exchanges.
private enum NIOTLSClient {
    /// Connect, handshake, one byte each way, close.
    static func exchange(context: TLSContext, port: Int) async throws -> Bool {
        try await run(context: context, port: port, payload: nil)
    }

    /// `B` and `bytes` more, written as the socket takes them; done at the server's byte.
    static func bulk(context: TLSContext, port: Int, bytes: Int) async throws -> Bool {
        try await run(context: context, port: port, payload: bytes)
    }

    private static func run(context: TLSContext, port: Int, payload: Int?) async throws -> Bool {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let done = loop.makePromise(of: Bool.self)
        let channel = try await ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(client: context, serverName: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(Driver(payload: payload, done: done))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        let ok = try await done.futureResult.get()
        try await channel.close()
        return ok
    }

    /// Writes once the handshake completes (the bulk in 64 KiB writes while the channel is
    /// writable) and ends at the server's byte.
    final class Driver: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let payload: Int?
        let done: EventLoopPromise<Bool>
        var left = 0
        var chunk: ByteBuffer?

        init(payload: Int?, done: EventLoopPromise<Bool>) {
            self.payload = payload
            self.done = done
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            guard case TLSUserEvent.handshakeCompleted = event else { return }
            guard let payload else {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [0])), promise: nil)
                return
            }
            left = payload
            chunk = ByteBuffer(repeating: 0x5A, count: 64 << 10)
            context.write(wrapOutboundOut(ByteBuffer(bytes: [UInt8(ascii: "B")])), promise: nil)
            pump(context)
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) { pump(context) }

        private func pump(_ context: ChannelHandlerContext) {
            guard let chunk else { return }
            while left > 0 && context.channel.isWritable {
                // Counted before the write: a write can change writability, which pumps again.
                let size = min(left, chunk.readableBytes)
                left -= size
                context.write(wrapOutboundOut(chunk.getSlice(at: chunk.readerIndex, length: size)!), promise: nil)
            }
            context.flush()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) { done.succeed(true) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { done.succeed(false) }
        func channelInactive(context: ChannelHandlerContext) { done.succeed(false) }
    }
}

/// The baseline's OpenSSL session on a blocking socket, through CAgentTLS's memory buffers.
private enum BlockingTLS {
    static func clientContext(trusting certificate: String) -> OpaquePointer? {
        guard let pem = FileManager.default.contents(atPath: certificate) else { return nil }
        return [UInt8](pem).withUnsafeBufferPointer { pem in
            agent_tls_client_context(1, pem.baseAddress, pem.count, nil, 0, nil, 0)
        }
    }

    /// Sends what the session has for the peer.
    static func pump(_ session: OpaquePointer, _ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        while agent_tls_pending_output(session) > 0 {
            let count = buffer.withUnsafeMutableBufferPointer { agent_tls_take_output(session, $0.baseAddress, $0.count) }
            guard buffer.withUnsafeBytes({ Bench.sendAll(fd, UnsafeRawBufferPointer(rebasing: $0[..<count])) }) else { return false }
        }
        return true
    }

    /// Reads from the socket into the session; false at the end or an error.
    static func fill(_ session: OpaquePointer, _ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        return buffer.withUnsafeBufferPointer { agent_tls_feed(session, $0.baseAddress, count) } == 1
    }

    static func handshake(_ session: OpaquePointer, _ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        for _ in 0..<64 {
            let result = agent_tls_handshake(session)
            guard pump(session, fd, &buffer) else { return false }
            if result == Int32(AGENT_TLS_OK) { return true }
            guard result == Int32(AGENT_TLS_WANT_READ), fill(session, fd, &buffer) else { return false }
        }
        return false
    }

    /// At least one plaintext byte into `out`; its count, or 0 at the end or an error.
    static func read(_ session: OpaquePointer, _ fd: Int32, _ buffer: inout [UInt8], _ out: inout [UInt8]) -> Int {
        while true {
            let count = out.withUnsafeMutableBufferPointer { agent_tls_read(session, $0.baseAddress, $0.count) }
            if count > 0 { return count }
            guard count == AGENT_TLS_WANT_READ, pump(session, fd, &buffer), fill(session, fd, &buffer) else { return 0 }
        }
    }

    static func write(_ session: OpaquePointer, _ fd: Int32, _ bytes: [UInt8], _ buffer: inout [UInt8]) -> Bool {
        let written = bytes.withUnsafeBufferPointer { agent_tls_write(session, $0.baseAddress, $0.count) }
        return written == Int32(AGENT_TLS_OK) && pump(session, fd, &buffer)
    }

    static func exchange(context: OpaquePointer, port: Int) -> Bool {
        run(context: context, port: port) { session, fd, buffer in
            var out = [UInt8](repeating: 0, count: 16)
            return write(session, fd, [0], &buffer) && read(session, fd, &buffer, &out) == 1
        }
    }

    static func bulk(context: OpaquePointer, port: Int, bytes: Int) -> Bool {
        run(context: context, port: port) { session, fd, buffer in
            guard write(session, fd, [UInt8(ascii: "B")], &buffer) else { return false }
            let chunk = [UInt8](repeating: 0x5A, count: 64 << 10)
            var left = bytes
            while left > 0 {
                let size = min(left, chunk.count)
                guard write(session, fd, Array(chunk[..<size]), &buffer) else { return false }
                left -= size
            }
            var out = [UInt8](repeating: 0, count: 16)
            return read(session, fd, &buffer, &out) == 1
        }
    }

    private static func run(context: OpaquePointer, port: Int, _ body: (OpaquePointer, Int32, inout [UInt8]) -> Bool) -> Bool {
        guard let fd = Bench.connect(port: port, noDelay: true) else { return false }
        defer { close(fd) }
        guard let session = agent_tls_session_new(context, 0, "localhost") else { return false }
        defer { agent_tls_session_free(session) }
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        return handshake(session, fd, &buffer) && body(session, fd, &buffer)
    }
}

/// The baseline's server: one thread, one connection at a time, as NIOTLSServer answers.
private final class BlockingTLSServer: @unchecked Sendable {
    // @unchecked: `listener` and `context` are set in init and only read after; the thread
    // is the only user of the sessions it makes.
    let listener: Int32
    let port: Int
    private let context: OpaquePointer

    init(certificate: String, key: String, bulk: Int) throws {
        guard let chain = FileManager.default.contents(atPath: certificate), let keyBytes = FileManager.default.contents(atPath: key),
            let made = [UInt8](chain).withUnsafeBufferPointer({ chain in
                [UInt8](keyBytes).withUnsafeBufferPointer { key in
                    agent_tls_server_context(chain.baseAddress, chain.count, key.baseAddress, key.count, nil, 0, nil, 0)
                }
            })
        else { throw ValidationError("no OpenSSL server context") }
        context = made
        guard let (fd, port) = Bench.listen() else { throw ValidationError("the blocking server could not listen") }
        listener = fd
        self.port = port
        let thread = Thread { [self] in serve(bulk: bulk) }
        thread.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(bulk: Int) {
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var out = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if let session = agent_tls_session_new(context, 1, nil) {
                if BlockingTLS.handshake(session, fd, &buffer) {
                    var received = BlockingTLS.read(session, fd, &buffer, &out)
                    if received > 0, out[0] == UInt8(ascii: "B") {
                        while received < bulk + 1 {
                            let count = BlockingTLS.read(session, fd, &buffer, &out)
                            guard count > 0 else { break }
                            received += count
                        }
                    }
                    _ = BlockingTLS.write(session, fd, [1], &buffer)
                }
                agent_tls_session_free(session)
            }
            close(fd)
        }
    }
}
