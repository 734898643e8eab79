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

    /// A write made while a drain completes the promises before it (a writer that answers a
    /// completion with more writes) leaves the channel unwritable: the drain does not then
    /// publish the writability it found before those promises ran.
    @Test func aWriteFromACompletedPromiseKeepsTheChannelUnwritable() async throws {
        let size = 4 << 20
        let outcome = Mutex<RefillingWriter.Outcome?>(nil)
        let acceptor = TunnelAcceptor { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(RefillingWriter(total: size) { result in outcome.withLock { $0 = result } })
            }
        }
        let tunnel = try await NamespaceTunnel.make(addresses: stackAddresses(0x32), acceptors: [4: acceptor])
        let script = """
            import socket
            s = socket.create_connection(('\(tunnel.addresses[0])', 4), timeout=120)
            got = 0
            while True:
                data = s.recv(1 << 20)
                if not data:
                    break
                got += len(data)
            print('received', got)
            """
        let run = await tunnel.python(script)
        #expect(run.stdout.contains("received \(size)"), "\(run.stdout)")
        #expect(await eventually(timeout: .seconds(60)) { outcome.withLock { $0 } != nil })
        let result = try #require(outcome.withLock { $0 })
        #expect(result.failures == 0 && result.refills > 10, "\(result)")
        #expect(result.staleWritable == 0, "\(result)")
        #expect(await eventually(timeout: .seconds(60)) { tunnel.stack.counters().openConnections == 0 })
        await tunnel.close()
    }
}

/// Writes `total` bytes as pairs of pieces, 48 KiB then 32 KiB - 1 (together above the
/// high-water mark): the completion of a pair's first piece writes the next pair. In the
/// queue a first piece is followed by its 32 KiB - 1, so the drain that completes it is the
/// one that takes the queue below the low-water mark: it finds the channel writable, then
/// the completion writes the next pair. Every writability event that says writable while
/// more than the high-water mark waits (bytes written whose promises have not completed) is
/// counted as stale. Closes once every byte is out.
final class RefillingWriter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    struct Outcome: Sendable {
        var refills = 0
        var staleWritable = 0
        var failures = 0
    }
    private let total: Int
    private let report: @Sendable (Outcome) -> Void
    private var written = 0
    private var completed = 0
    private var outcome = Outcome()

    init(total: Int, report: @escaping @Sendable (Outcome) -> Void) {
        self.total = total
        self.report = report
    }

    func channelActive(context: ChannelHandlerContext) {
        writePair(context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, written - completed > TunnelChannelCore.highWaterMark { outcome.staleWritable += 1 }
    }

    private func writePair(_ context: ChannelHandlerContext) {
        guard written < total else { return }
        write(48 * 1024, refilling: true, context)
        write(32 * 1024 - 1, refilling: false, context)
        context.flush()
    }

    private func write(_ size: Int, refilling: Bool, _ context: ChannelHandlerContext) {
        let count = min(size, total - written)
        guard count > 0 else { return }
        written += count
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenComplete { [self] result in
            if case .failure = result { outcome.failures += 1 }
            completed += count
            if refilling, written < total {
                outcome.refills += 1
                writePair(context)
            } else if completed == total {
                report(outcome)
                context.close(promise: nil)
            }
        }
        context.write(wrapOutboundOut(ByteBuffer(repeating: 0x62, count: count)), promise: promise)
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
    private var outputRequested = false
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
        if offset == sending.count, !outputRequested {
            outputRequested = true
            // Closed for good only once every byte went to lwIP and the FIN after them: a
            // full close before that would drop what still waits (as NIO's channels do).
            let closed = context.eventLoop.makePromise(of: Void.self)
            context.close(mode: .output, promise: closed)
            closed.futureResult.assumeIsolated().whenSuccess {
                self.outputDone = true
                self.finishIfDone(context)
            }
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
