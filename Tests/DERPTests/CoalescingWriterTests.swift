import DERP
import Glibc
import NIOCore
import NIOEmbedded
import NIOPosix
import Synchronization
import Testing

/// The DERP send path's writer: one flush per loop turn, order kept, every promise kept.
struct CoalescingWriterTests {
    @Test func writesInOneTurnLeaveTogetherInOrderAfterTheTurn() throws {
        let channel = EmbeddedChannel()
        let writer = CoalescingWriter(channel: channel)
        let loop = channel.embeddedEventLoop
        let promises = (0..<3).map { _ in loop.makePromise(of: Void.self) }
        for (index, promise) in promises.enumerated() {
            writer.write(channel.allocator.buffer(string: "frame \(index)"), promise: promise)
        }
        // Nothing reaches the channel inside the turn that wrote it.
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        loop.run()
        // Small ones leave as one write, in order.
        #expect(try channel.readOutbound(as: ByteBuffer.self) == channel.allocator.buffer(string: "frame 0frame 1frame 2"))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        for promise in promises { try promise.futureResult.wait() }
        // A later turn's writes are flushed by a turn of their own.
        writer.write(channel.allocator.buffer(string: "later"), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        loop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == channel.allocator.buffer(string: "later"))
        _ = try channel.finish()
    }

    @Test func writesAfterTheChannelClosedFailTheirPromises() throws {
        let channel = EmbeddedChannel()
        let writer = CoalescingWriter(channel: channel)
        let loop = channel.embeddedEventLoop
        try channel.close().wait()
        // One alone, then two merged into one write: every promise fails.
        let alone = loop.makePromise(of: Void.self)
        writer.write(channel.allocator.buffer(string: "late"), promise: alone)
        loop.run()
        #expect(throws: ChannelError.self) { try alone.futureResult.wait() }
        let merged = (0..<2).map { _ in loop.makePromise(of: Void.self) }
        for promise in merged { writer.write(channel.allocator.buffer(string: "later"), promise: promise) }
        loop.run()
        for promise in merged { #expect(throws: ChannelError.self) { try promise.futureResult.wait() } }
    }

    /// A large buffer goes out as it is, between the merged runs before and after it; a
    /// merged write holds at most 16 KiB (a WebSocket message under a peer's 32 KiB limit).
    @Test func largeBuffersKeepTheirPlaceAndMergedWritesAreBounded() throws {
        let channel = EmbeddedChannel()
        let writer = CoalescingWriter(channel: channel)
        let loop = channel.embeddedEventLoop
        var expected: [UInt8] = []
        var promises: [EventLoopPromise<Void>] = []
        func write(_ count: Int, _ byte: UInt8) {
            let promise = loop.makePromise(of: Void.self)
            promises.append(promise)
            expected += [UInt8](repeating: byte, count: count)
            writer.write(channel.allocator.buffer(repeating: byte, count: count), promise: promise)
        }
        write(100, 1)
        write(200, 2)
        write(20_000, 3)
        for index in 0..<100 { write(1_400, UInt8(4 + index % 200)) }
        loop.run()
        var sizes: [Int] = []
        var received: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            sizes.append(buffer.readableBytes)
            received += buffer.readableBytesView
        }
        #expect(received == expected)
        // 100 + 200 merged, the large one alone, then the 1 400-byte pieces eleven to a write
        // (15 400 bytes; a twelfth would pass 16 KiB): nine such writes and one of the last.
        #expect(sizes.prefix(2) == [300, 20_000], "\(sizes)")
        #expect(Array(sizes.dropFirst(2)) == [Int](repeating: 15_400, count: 9) + [1_400], "\(sizes)")
        for promise in promises { try promise.futureResult.wait() }
        _ = try channel.finish()
    }

    /// Writers on other threads reach a real socket whole and in order per writer.
    @Test func writesFromOtherThreadsArriveWholeAndInOrder() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let (left, right) = try await socketPair(group)
        let all = group.next().makePromise(of: Void.self)
        let writers = 4
        let perWriter = 500
        let collector = Collector(expected: writers * perWriter * 2, done: all)
        try await right.pipeline.addHandler(collector).get()
        let writer = CoalescingWriter(channel: left)
        await withTaskGroup(of: Void.self) { tasks in
            for id in 0..<writers {
                tasks.addTask {
                    for sequence in 0..<perWriter {
                        writer.write(left.allocator.buffer(bytes: [UInt8(id), UInt8(truncatingIfNeeded: sequence)]), promise: nil)
                    }
                }
            }
        }
        try await all.futureResult.get()
        var next = [Int](repeating: 0, count: writers)
        let bytes = collector.received.withLock { $0 }
        for pair in stride(from: 0, to: bytes.count, by: 2) {
            let id = Int(bytes[pair])
            #expect(bytes[pair + 1] == UInt8(truncatingIfNeeded: next[id]), "writer \(id) out of order")
            next[id] += 1
        }
        #expect(next == [Int](repeating: perWriter, count: writers))
        try await left.close()
        try? await right.close()
    }

    private func socketPair(_ group: MultiThreadedEventLoopGroup) async throws -> (any Channel, any Channel) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw ChannelError.inappropriateOperationForState }
        let left = try await ClientBootstrap(group: group).withConnectedSocket(fds[0]).get()
        let right = try await ClientBootstrap(group: group).withConnectedSocket(fds[1]).get()
        return (left, right)
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received = Mutex<[UInt8]>([])
        let expected: Int
        let done: EventLoopPromise<Void>

        init(expected: Int, done: EventLoopPromise<Void>) {
            self.expected = expected
            self.done = done
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            let complete = received.withLock { bytes -> Bool in
                let before = bytes.count
                bytes.append(contentsOf: buffer.readableBytesView)
                return before < expected && bytes.count >= expected
            }
            if complete { done.succeed() }
        }
    }
}
