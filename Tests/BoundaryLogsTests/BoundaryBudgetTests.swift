import AgentCore
import AgentProto
import AgentTestSupport
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Testing

@testable import BoundaryLogs

/// Half frames cannot lock the producer out, and sequence numbers wrap.
@Suite(.timeLimit(.minutes(3)))
struct BoundaryBudgetTests {
    /// 64 connections that each send half a frame and stop used to fill every slot, and the
    /// real producer was refused for the 5-minute idle time (its logs lost). Now a new
    /// connection closes the longest-stuck one and gets in at once.
    @Test func halfFramesCannotLockTheProducerOut() async throws {
        // The frame deadline is the other defence (tested below); here only eviction counts.
        try await BoundaryHarness.with(configure: { $0.partialFrameTimeout = .seconds(300) }) { harness in
            let frame = Boundary.v2(Boundary.request(["https://stuck.invalid/"]))
            var stuck: [LoopbackSocket] = []
            for _ in 0..<harness.server.configuration.maxConnections {
                let socket = try harness.connect()
                #expect(socket.send(Array(frame.prefix(frame.count / 2))))
                stuck.append(socket)
            }
            #expect(await eventually { harness.server.registry.count == harness.server.configuration.maxConnections })
            let producer = try harness.connect()
            #expect(producer.send(Boundary.v2(Boundary.request(["https://producer.invalid/"]))))
            #expect(await eventually { harness.upward.urls == ["https://producer.invalid/"] }, "the producer got in")
            #expect(harness.server.registry.evictedCount == 1)
            #expect(harness.server.registry.count == harness.server.configuration.maxConnections)
            // The one closed to make room was one of the stuck ones. Its close reaches the
            // client after the eviction is counted (on a loaded host, later than any fixed
            // wait): wait for one to close, then count.
            let held = stuck
            func closedCount() async -> Int {
                var closed = 0
                for socket in held where await socket.isClosedByPeer(within: .milliseconds(1)) { closed += 1 }
                return closed
            }
            #expect(await eventually { await closedCount() >= 1 })
            #expect(await closedCount() == 1)
        }
    }

    /// Among idle connections (no frame begun), the longest-idle one makes room, not a
    /// connection in the middle of a frame.
    @Test func anIdleConnectionMakesRoomBeforeOneMidFrame() async throws {
        try await BoundaryHarness.with(configure: {
            $0.maxConnections = 2; $0.partialFrameTimeout = .seconds(300)
        }) { harness in
            let frame = Boundary.v2(Boundary.request(["https://mid.invalid/"]))
            let midFrame = try harness.connect()
            #expect(midFrame.send(Array(frame.prefix(6))))
            // The server has read the frame's start (else, on a loaded host, the mid-frame
            // connection still looks idle, and the longest-idle, when the third arrives).
            #expect(await eventually { harness.server.registry.busyCount == 1 })
            let idle = try harness.connect()
            #expect(idle.send(Boundary.v2(Boundary.request(["https://idle.invalid/"]))))
            #expect(await eventually { harness.upward.urls == ["https://idle.invalid/"] })
            let third = try harness.connect()
            #expect(await idle.isClosedByPeer(within: .seconds(10)))
            // The mid-frame connection is still open: its frame completes.
            #expect(midFrame.send(Array(frame.dropFirst(6))))
            #expect(third.send(Boundary.v1(Boundary.request(["https://third.invalid/"]))))
            #expect(await eventually { Set(harness.upward.urls) == ["https://idle.invalid/", "https://mid.invalid/", "https://third.invalid/"] })
        }
    }

    /// A frame begun and not finished within the partial-frame deadline closes its
    /// connection (the deadline runs from the frame's first byte); whole frames never do.
    @Test func aHalfFrameIsClosedAtItsDeadline() async throws {
        try await BoundaryHarness.with(configure: { $0.partialFrameTimeout = .milliseconds(200) }) { harness in
            let whole = try harness.connect()
            #expect(whole.send(Boundary.v1(Boundary.request(["https://whole.invalid/"]))))
            let half = try harness.connect()
            let frame = Boundary.v2(Boundary.request(["https://half.invalid/"]))
            #expect(half.send(Array(frame.prefix(3))))
            #expect(await half.isClosedByPeer(within: .seconds(10)), "the half frame's connection is closed")
            #expect(await eventually { harness.server.registry.count == 1 })
            // The other connection, between frames, stays and goes on.
            #expect(whole.send(Boundary.v1(Boundary.request(["https://after.invalid/"]))))
            #expect(await eventually { harness.upward.urls == ["https://whole.invalid/", "https://after.invalid/"] })
        }
    }

    /// The decoder says whether the bytes so far end inside a frame (what the connection
    /// watch's deadline asks), whatever the split.
    @Test func theDecoderKnowsWhenItIsMidFrameSplitAnywhere() throws {
        let frames = Boundary.v1(Boundary.request(["https://a.invalid/"])) + Boundary.frame(tag: 2, []) + Boundary.v2(Boundary.request(["https://b.invalid/"]))
        for split in 0...frames.count {
            var decoder = BoundaryFrameDecoder()
            var buffer = ByteBuffer(bytes: frames[..<split])
            var count = 0
            while try decoder.next(from: &buffer) != nil { count += 1 }
            // Between frames exactly when the split falls on a frame's end.
            let first = Boundary.v1(Boundary.request(["https://a.invalid/"])).count
            #expect(decoder.isMidFrame == ![0, first, first + 4, frames.count].contains(split), "split at \(split)")
            buffer.writeBytes(frames[split...])
            while try decoder.next(from: &buffer) != nil { count += 1 }
            #expect(count == 3, "split at \(split)")
            #expect(!decoder.isMidFrame, "split at \(split)")
        }
        var decoder = BoundaryFrameDecoder()
        var buffer = ByteBuffer(bytes: frames.prefix(2))
        #expect(try decoder.next(from: &buffer) == nil)
        #expect(decoder.isMidFrame)
    }

    /// 2147483647 followed by anything used to trap (`previous + 1` overflowed). Numbers are
    /// serial numbers: a natural wrap is no gap, and a gap across the wrap counts exactly the
    /// missing numbers.
    @Test func sequenceNumbersWrapWithoutTrappingAndGapsCountAcrossTheWrap() {
        var tracker = SequenceTracker()
        #expect(tracker.check(session: "w", numbers: [Int32.max - 1, Int32.max, Int32.min, Int32.min + 1]) == [], "a natural wrap")
        var across = SequenceTracker()
        #expect(across.check(session: "g", numbers: [Int32.max - 1]) == [])
        #expect(across.check(session: "g", numbers: [Int32.min + 2]) == [.missing(from: Int32.max, through: Int32.min + 1, count: 3)])
        var after = SequenceTracker()
        #expect(after.check(session: "h", numbers: [Int32.max]) == [])
        #expect(after.check(session: "h", numbers: [Int32.min + 10]) == [.missing(from: Int32.min, through: Int32.min + 9, count: 10)])
        // A number behind the last (here 2^31 + 6 ahead, so behind) is a repeat.
        var behind = SequenceTracker()
        #expect(behind.check(session: "b", numbers: [Int32.max, 5]) == [.repeated(5)])
        #expect(behind.check(session: "b", numbers: [Int32.min]) == [], "the last is still 2147483647")
    }

    /// The same through the socket: the connection survives the wrap and keeps forwarding.
    @Test func aWrappingSessionIsForwardedWithoutACrash() async throws {
        try await BoundaryHarness.with { harness in
            let socket = try harness.connect()
            let session = "7a7b7c7d-0e0f-4a1b-8c2d-3e4f5a6b7c8d"
            #expect(socket.send(Boundary.v2(Boundary.request(["https://w.invalid/0"], session: session, firstSequence: Int32.max))))
            #expect(socket.send(Boundary.v2(Boundary.request(["https://w.invalid/1"], session: session, firstSequence: Int32.min + 3))))
            #expect(socket.send(Boundary.v2(Boundary.request(["https://w.invalid/2", "https://w.invalid/3"], session: session, firstSequence: Int32.max))))
            #expect(await eventually { harness.upward.urls.count == 4 })
            #expect(harness.upward.urls == (0..<4).map { "https://w.invalid/\($0)" })
        }
    }
}
