import AgentCore
import AgentProto
import AgentTestSupport
import Foundation
import Logging
import SwiftProtobuf
import Testing

@testable import BoundaryLogs

/// The spool across restarts: nothing read before a clean shutdown is sent again, nothing
/// taken from it is lost to a crash, and the batches in flight are spooled as they came.
@Suite struct BoundarySpoolTests {
    private static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    private static let session = "5a6b7c8d-0e0f-4a1b-8c2d-3e4f5a6b7c8d"

    private static func directory(_ name: String) -> String {
        NSTemporaryDirectory() + "boundary-\(name)-" + UUID().uuidString.prefix(8)
    }

    /// 250 spooled batches; the first 100 (one merged request) are delivered and the next
    /// 100 held when the agent stops: the next start sends exactly the 150 not delivered,
    /// in order. (The read offset lived only in memory: the segment was read again from its
    /// start, 350 logs.)
    @Test func aCleanRestartSendsWhatWasDeliveredNeverAgain() async throws {
        let directory = Self.directory("restart-offset")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let spool = BoundarySpool(directory: directory + "/spool", maxBytes: 1 << 20, logger: Self.quiet)
            for index in 0..<250 {
                let request = Boundary.request(["https://s.invalid/\(index)"], session: Self.session, firstSequence: Int32(index))
                #expect(spool.append(try request.serializedBytes()))
            }
        }
        let first = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: first, directory: directory) { harness in
            #expect(await eventually { first.heldCount == 1 && harness.forwarder.accounting.inFlight == 100 })
            first.deliverHeld()
            #expect(await eventually { first.urls.count == 100 && first.heldCount == 1 && harness.forwarder.accounting.inFlight == 100 })
        }
        #expect(first.urls == (0..<100).map { "https://s.invalid/\($0)" })
        #expect(first.withdrawn == 1, "the held request was taken back and spooled")
        let second = RecordingUpward(.deliver)
        try await BoundaryHarness.with(upward: second, directory: directory) { harness in
            #expect(await eventually { harness.forwarder.isDrained && second.urls.count >= 150 })
        }
        #expect(second.urls == (100..<250).map { "https://s.invalid/\($0)" }, "each log once, in order")
    }

    /// A spool segment read into memory stays on disk until every record taken from it is
    /// settled: a crash before then (a second spool opened on the directory, as after a
    /// restart) still finds them; once settled, the segment is gone.
    @Test func recordsTakenAndNotSettledSurviveACrash() throws {
        let directory = Self.directory("crash")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let spool = BoundarySpool(directory: directory, maxBytes: 1 << 20, logger: Self.quiet)
        for index in 0..<60 { #expect(spool.append(Array("record \(index)".utf8))) }
        var taken: [Int64] = []
        while let (_, segment) = spool.next() { taken.append(segment) }
        #expect(taken.count == 60 && spool.isEmpty)
        var reopened: [String] = []
        let afterCrash = BoundarySpool(directory: directory, maxBytes: 1 << 20, logger: Self.quiet)
        while let (payload, _) = afterCrash.next() { reopened.append(String(decoding: payload, as: UTF8.self)) }
        #expect(reopened == (0..<60).map { "record \($0)" }, "the taken records are still on disk")
        for segment in taken { spool.settle(segment: segment) }
        #expect(BoundarySpool(directory: directory, maxBytes: 1 << 20, logger: Self.quiet).next() == nil, "settled, the segment is gone")
        #expect(spool.append(Array("later".utf8)) && spool.next()?.payload == Array("later".utf8), "and the spool goes on")
    }

    /// A merged request in flight over 1 MiB (99 batches of about 11 KB) is spooled at
    /// shutdown as its 99 batches: each record stays under the reader's limit. (Spooled
    /// merged, it was read back as a torn segment and all 990 logs were lost.)
    @Test func aLargeMergedRequestInFlightIsSpooledAsItsBatches() async throws {
        let directory = Self.directory("merged")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let padding = String(repeating: "p", count: 1100)
        let first = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: first, spoolBytes: 8 << 20, directory: directory) { harness in
            harness.forwarder.enqueue(Boundary.request(["https://blocker.invalid/"], session: "other"))
            #expect(await eventually { first.heldCount == 1 })
            for batch in 0..<99 {
                let urls = (0..<10).map { "https://m.invalid/\(batch * 10 + $0)/\(padding)" }
                harness.forwarder.enqueue(Boundary.request(urls, session: Self.session, firstSequence: Int32(batch * 10)))
            }
            #expect(harness.forwarder.accounting.queued == 99)
            first.deliverHeld()
            #expect(await eventually { first.heldCount == 1 && harness.forwarder.accounting.inFlight == 99 }, "the 99 travel merged")
        }
        let second = RecordingUpward(.deliver)
        try await BoundaryHarness.with(upward: second, spoolBytes: 8 << 20, directory: directory) { harness in
            #expect(await eventually { harness.forwarder.isDrained && second.urls.count >= 990 })
        }
        let numbers = second.urls.compactMap { Int($0.split(separator: "/")[2]) }
        #expect(numbers == Array(0..<990), "all 990 logs once, in order")
    }

    /// The shutdown's segment cannot be written (its name is taken by a directory): the 100
    /// batches read from the spool and held are still on disk, so none is counted lost, and
    /// the next start sends them and the batch spooled after them. (The 100 were counted lost.)
    @Test func aFailedCheckpointLosesNothingReadFromTheSpool() async throws {
        let directory = Self.directory("checkpoint-failed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let spool = BoundarySpool(directory: directory + "/spool", maxBytes: 1 << 20, logger: Self.quiet)
            for index in 0..<100 {
                let request = Boundary.request(["https://s.invalid/\(index)"], session: Self.session, firstSequence: Int32(index))
                #expect(spool.append(try request.serializedBytes()))
            }
        }
        // The segment the checkpoint writes goes before the first one (1000000001).
        let blocker = directory + "/spool/001000000000.seg"
        try FileManager.default.createDirectory(atPath: blocker + "/x", withIntermediateDirectories: true)
        let first = RecordingUpward(.hold)
        var forwarder: BoundaryForwarder?
        try await BoundaryHarness.with(upward: first, directory: directory) { harness in
            forwarder = harness.forwarder
            #expect(await eventually { first.heldCount == 1 && harness.forwarder.accounting.inFlight == 100 })
            // Behind records not yet settled, a new batch is spooled after them.
            harness.forwarder.enqueue(Boundary.request(["https://later.invalid/"], session: "other"))
            #expect(harness.forwarder.accounting.spooled == 1)
        }
        #expect(forwarder?.droppedBatches == [:], "\(String(describing: forwarder?.droppedBatches))")
        try FileManager.default.removeItem(atPath: blocker)
        let second = RecordingUpward(.deliver)
        try await BoundaryHarness.with(upward: second, directory: directory) { harness in
            #expect(await eventually { harness.forwarder.isDrained && second.urls.count >= 101 })
        }
        #expect(second.urls == (0..<100).map { "https://s.invalid/\($0)" } + ["https://later.invalid/"], "each log once, in order")
    }

    /// A batch the session still holds unsent at shutdown is taken back from it and spooled,
    /// so it arrives once: not from the session's outbox and again from the spool.
    @Test func aHeldBatchIsTakenBackAndArrivesOnce() async throws {
        let directory = Self.directory("withdraw")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: first, directory: directory) { harness in
            harness.forwarder.enqueue(Boundary.request(["https://once.invalid/"]))
            #expect(await eventually { first.heldCount == 1 })
        }
        first.release()  // the session draining its outbox after the forwarder stopped
        let second = RecordingUpward(.deliver)
        try await BoundaryHarness.with(upward: second, directory: directory) { harness in
            #expect(await eventually { harness.forwarder.isDrained && second.urls.count >= 1 })
        }
        #expect(first.urls + second.urls == ["https://once.invalid/"])
    }

    /// A batch of 1500 logs goes up in two parts; shutdown comes with the first delivered and
    /// the second held: only the second part's 500 logs are spooled, and every log arrives
    /// once (the whole batch was spooled, and its first 1000 logs arrived twice).
    @Test func aSplitBatchSpoolsOnlyThePartsThatDidNotGo() async throws {
        let directory = Self.directory("split")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: first, directory: directory) { harness in
            harness.forwarder.enqueue(Boundary.request((0..<1500).map { "https://x.invalid/\($0)" }, session: Self.session))
            #expect(await eventually { first.heldCount == 1 })
            first.deliverHeld()
            #expect(await eventually { first.urls.count == 1000 && first.heldCount == 1 })
        }
        let second = RecordingUpward(.deliver)
        try await BoundaryHarness.with(upward: second, directory: directory) { harness in
            #expect(await eventually { harness.forwarder.isDrained && second.urls.count >= 500 })
        }
        #expect(first.urls + second.urls == (0..<1500).map { "https://x.invalid/\($0)" }, "each log once, in order")
    }
}
