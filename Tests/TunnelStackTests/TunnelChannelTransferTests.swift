import AgentTestSupport
import NIOCore
import Synchronization
import Testing
import TunnelStack

/// Tunnel channels end to end: a real kernel TCP peer in a private network namespace, lwIP,
/// and a NIO pipeline on the channel (needs root, like the other namespace suites).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct TunnelChannelTransferTests {
    @Test func tenMiBEachWayByteExactWithBackPressure() async throws {
        let size = 10 << 20
        let toClient = pattern(size, step: 13, offset: 5)
        let toServer = pattern(size, step: 7, offset: 3)
        let outcome = Mutex<(count: Int, match: Bool)?>(nil)
        let acceptor = TunnelAcceptor { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.syncOptions?.setOption(.allowRemoteHalfClosure, value: true)
                try channel.pipeline.syncOperations.addHandler(
                    TransferHandler(sending: toClient, expecting: toServer) { count, match in outcome.withLock { $0 = (count, match) } })
            }
        }
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x30), acceptors: [4: acceptor])
        let script = pythonTransferScript(host: "\(tunnel.addresses[0])", port: 4, size: size)
        let run = await tunnel.python(script)
        #expect(run.stdout.contains("received \(size) match True"), "\(run.stdout)")
        let done = await eventually(timeout: .seconds(60)) { outcome.withLock { $0 } != nil }
        #expect(done)
        let result = outcome.withLock { $0 }
        #expect(result?.count == size && result?.match == true, "\(String(describing: result))")
        #expect(await eventually(timeout: .seconds(60)) { tunnel.stack.counters().openConnections == 0 })
        await tunnel.close()
    }

    @Test func aPeerThatVanishesMidTransferClosesTheChannel() async throws {
        let closed = TestFlag()
        let sentBytes = ByteCount()
        let acceptor = TunnelAcceptor { channel in
            channel.closeFuture.whenComplete { _ in closed.set() }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(EndlessWriter(sent: sentBytes))
            }
        }
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x31), acceptors: [4: acceptor])
        // The client reads 1 MiB and exits with bytes unread: its kernel resets the connection.
        let script = """
            import socket, os
            s = socket.create_connection(('\(tunnel.addresses[0])', 4), timeout=120)
            got = 0
            while got < (1 << 20):
                data = s.recv(65536)
                if not data:
                    break
                got += len(data)
            print('read', got)
            os._exit(0)
            """
        let run = await tunnel.python(script)
        #expect(run.stdout.hasPrefix("read "), "\(run.stdout)")
        #expect(await eventually(timeout: .seconds(60)) { closed.isSet })
        #expect(await eventually(timeout: .seconds(60)) { tunnel.stack.counters().openConnections == 0 })
        #expect(sentBytes.value.load(ordering: .relaxed) >= 1 << 20)
        await tunnel.close()
    }
}

/// Sends `sending` as writability allows, FIN after it; checks what arrives against
/// `expecting` at the peer's FIN; closes once both are done.
final class TransferHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let sending: [UInt8]
    private let expecting: [UInt8]
    private let report: @Sendable (Int, Bool) -> Void
    private var offset = 0
    private var received: [UInt8] = []
    private var inputDone = false
    private var outputDone = false

    init(sending: [UInt8], expecting: [UInt8], report: @escaping @Sendable (Int, Bool) -> Void) {
        self.sending = sending
        self.expecting = expecting
        self.report = report
        received.reserveCapacity(expecting.count)
    }

    func channelActive(context: ChannelHandlerContext) {
        pump(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pump(context)
    }

    /// Writes 64 KiB pieces while the channel is writable (bounded by the data's size).
    private func pump(_ context: ChannelHandlerContext) {
        while context.channel.isWritable, offset < sending.count {
            let end = min(offset + 65536, sending.count)
            context.write(wrapOutboundOut(ByteBuffer(bytes: sending[offset..<end])), promise: nil)
            offset = end
        }
        context.flush()
        if offset == sending.count, !outputDone {
            outputDone = true
            context.close(mode: .output, promise: nil)
            finishIfDone(context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // Bounded: never more than one byte beyond what is expected is kept.
        if received.count <= expecting.count { received += buffer.readableBytesView.prefix(expecting.count + 1 - received.count) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputDone = true
            report(received.count, received == expecting)
            finishIfDone(context)
        }
    }

    private func finishIfDone(_ context: ChannelHandlerContext) {
        if inputDone, outputDone { context.close(promise: nil) }
    }
}

/// Writes 64 KiB pieces for as long as the channel is writable and open.
final class EndlessWriter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let sent: ByteCount
    private let piece = ByteBuffer(repeating: 0x61, count: 65536)

    init(sent: ByteCount) {
        self.sent = sent
    }

    func channelActive(context: ChannelHandlerContext) {
        pump(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pump(context)
    }

    private func pump(_ context: ChannelHandlerContext) {
        // Bounded per turn by the high water mark.
        while context.channel.isActive, context.channel.isWritable {
            context.write(wrapOutboundOut(piece), promise: nil)
            sent.value.add(piece.readableBytes, ordering: .relaxed)
        }
        context.flush()
    }
}

/// A byte count shared between the loop and the test.
final class ByteCount: Sendable {
    let value = Atomic<Int>(0)
}
