import AgentCore
import AgentProto
import AgentTestSupport
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import Testing

@testable import BoundaryLogs

/// The boundary protocol at byte level through a real unix socket.
@Suite(.timeLimit(.minutes(3)))
struct BoundaryProxyTests {
    @Test func framesArriveInOrderWithEveryFieldAndBothTags() async throws {
        try await BoundaryHarness.with { harness in
            let socket = try harness.connect()
            let session = "6f1d3a2b-4c5e-4f70-8a9b-0c1d2e3f4a5b"
            var frames: [UInt8] = Boundary.v2(Boundary.request(["https://one.example.invalid/a"], session: session))
            frames += Boundary.v1(Boundary.request(["https://two.example.invalid/"], allowed: false))
            for index in 3...6 { frames += Boundary.v2(Boundary.request(["https://\(index).example.invalid/"], session: session, firstSequence: Int32(index - 2))) }
            #expect(socket.send(frames))
            #expect(await eventually { harness.upward.urls.count == 6 })
            let batches = harness.upward.batches
            // In order per session; the session-less batch may travel apart (never merged).
            let sessionURLs = batches.filter { $0.sessionID == session }.flatMap { $0.entries.compactMap { $0.httpRequest?.url } }
            #expect(sessionURLs == ["https://one.example.invalid/a"] + (3...6).map { "https://\($0).example.invalid/" })
            #expect(harness.upward.urls.contains("https://two.example.invalid/"))
            let first = try #require(batches.first?.entries.first)
            #expect(batches[0].sessionID == session, "session_id unchanged")
            #expect(first.allowed && first.httpRequest?.method == "GET" && first.httpRequest?.matchedRule == "domain=example.invalid")
            #expect(first.time == .init(seconds: 1_767_225_600, nanos: 123_456_789), "seconds and nanos unchanged")
            // The session-less batch is never merged with a session's.
            let unsessioned = batches.first { $0.sessionID == "" }
            #expect(unsessioned?.entries.count == 1 && unsessioned?.entries.first?.allowed == false)
            #expect(batches.allSatisfy { $0.sessionID == "" || $0.sessionID == session })
        }
    }

    /// A `Date` in between rounded the nanoseconds (123456789 came out as
    /// 123456716, 1 as 0); they must reach the upward batch exactly.
    @Test(arguments: [123_456_789, 1, 0, 999_999_999] as [Int32])
    func timestampsKeepTheirNanoseconds(nanos: Int32) async throws {
        try await BoundaryHarness.with { harness in
            let socket = try harness.connect()
            #expect(socket.send(Boundary.v2(Boundary.request(["https://t.example.invalid/"], nanos: nanos))))
            #expect(await eventually { harness.upward.urls.count == 1 })
            let entry = try #require(harness.upward.batches.first?.entries.first)
            #expect(entry.time == .init(seconds: 1_767_225_600, nanos: nanos))
        }
    }

    @Test func concurrentConnectionsEachForward() async throws {
        try await BoundaryHarness.with { harness in
            let sockets = try (0..<3).map { _ in try harness.connect() }
            for (index, socket) in sockets.enumerated() { socket.send(Boundary.v2(Boundary.request(["https://c\(index).invalid/"]))) }
            #expect(await eventually { harness.upward.urls.count == 3 })
            #expect(Set(harness.upward.urls) == ["https://c0.invalid/", "https://c1.invalid/", "https://c2.invalid/"])
        }
    }

    @Test(arguments: [[0x01, 0x00, 0x80, 0x01], [0xFF, 0x00, 0x80, 0x01], [0x00, 0x00, 0x80, 0x01], [0x03, 0x00, 0x00, 0x00]] as [[UInt8]])
    func badHeadersCloseTheConnection(header: [UInt8]) async throws {
        try await BoundaryHarness.with { harness in
            let socket = try harness.connect()
            socket.send(header)
            let (_, closed) = await socket.readAll(timeout: .seconds(5))
            #expect(closed)
            // Others are not affected.
            let other = try harness.connect()
            other.send(Boundary.v1(Boundary.request(["https://after.invalid/"])))
            #expect(await eventually { harness.upward.urls == ["https://after.invalid/"] })
        }
    }

    @Test func undecodableBodiesAndEmptyEnvelopesAreSkippedAndTheStreamContinues() async throws {
        try await BoundaryHarness.with { harness in
            let socket = try harness.connect()
            var bytes = Boundary.frame(tag: 1, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
            bytes += Boundary.frame(tag: 2, [])  // no variant
            bytes += Boundary.status(channelFull: 5, batchFull: 3)
            bytes += Boundary.status(channelFull: 0, batchFull: -2)
            bytes += Boundary.frame(tag: 1, [])  // an empty request is forwarded as usual
            bytes += Boundary.v1(Boundary.request(["https://next.invalid/"]))
            socket.send(bytes)
            #expect(await eventually { harness.upward.urls == ["https://next.invalid/"] })
            #expect(harness.upward.batches.reduce(0) { $0 + $1.entries.count } == 1, "the empty request adds no entry")
            // Still open: another frame goes through.
            socket.send(Boundary.v2(Boundary.request(["https://still.invalid/"])))
            #expect(await eventually { harness.upward.urls.last == "https://still.invalid/" })
        }
    }

    /// A payload of exactly 32768 bytes is accepted (and split into parts in flight
    /// by nothing: one request in, one out).
    @Test func aPayloadOfExactly32768BytesIsAccepted() async throws {
        try await BoundaryHarness.with { harness in
            var url = "https://big.invalid/"
            var request = Boundary.request([url])
            var size = (try request.serializedBytes() as [UInt8]).count
            url += String(repeating: "x", count: 32768 - size)
            request = Boundary.request([url])
            size = (try request.serializedBytes() as [UInt8]).count
            // The length prefix of the URL may grow by a byte: trim to land exactly.
            while size > 32768 {
                url.removeLast()
                request = Boundary.request([url])
                size = (try request.serializedBytes() as [UInt8]).count
            }
            #expect(size == 32768)
            let socket = try harness.connect()
            socket.send(Boundary.v1(request))
            #expect(await eventually { harness.upward.urls == [url] })
        }
    }

    /// Beyond the reference: an outage loses nothing up to the spool's bound, and order holds.
    @Test func anOutageSpoolsAndDeliversEverythingInOrder() async throws {
        let upward = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: upward) { harness in
            let socket = try harness.connect()
            let session = "0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d"
            // Sent from a thread of its own: a blocking send of 300 frames must not hold one
            // of the cooperative threads the proxy under test needs.
            await onThread {
                for batch in 0..<300 {
                    let urls = (0..<10).map { "https://h.invalid/\(batch * 10 + $0)" }
                    socket.send(Boundary.v2(Boundary.request(urls, session: session, firstSequence: Int32(batch * 10))))
                }
            }
            // One in flight, 100 in memory, the rest on disk.
            #expect(await eventually { !FileManager.default.fileExists(atPath: harness.directory + "/spool") || (try? FileManager.default.contentsOfDirectory(atPath: harness.directory + "/spool"))?.isEmpty == false })
            try await Task.sleep(for: .milliseconds(200))
            upward.release()
            #expect(await eventually(timeout: .seconds(20)) { upward.urls.count >= 3000 })
            let urls = upward.urls
            #expect(urls.count == 3000 && urls == (0..<3000).map { "https://h.invalid/\($0)" }, "every log once, in order")
        }
    }

    @Test func whatIsQueuedAtShutdownArrivesAfterTheNextStart() async throws {
        let directory = NSTemporaryDirectory() + "boundary-restart-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: first, directory: directory) { harness in
            let socket = try harness.connect()
            for batch in 0..<150 { socket.send(Boundary.v1(Boundary.request(["https://r.invalid/\(batch)"]))) }
            // Every frame read before the shutdown (a frame still unread in the socket is the
            // sender's to resend: the connection closes under it).
            #expect(await eventually(timeout: .seconds(30)) { harness.forwarder.enqueuedBatches == 150 })
        }
        let second = RecordingUpward(.deliver)
        try await BoundaryHarness.with(upward: second, directory: directory) { _ in
            #expect(await eventually { second.urls.count >= 150 })
            #expect(second.urls == (0..<150).map { "https://r.invalid/\($0)" })
        }
    }

    /// Ordered by counters, never by a quiet interval: the outage ends once every batch was
    /// read (a spool that stopped growing only says it is full, not that reading is done),
    /// and the outcome is read once nothing is left in flight, queued or spooled.
    @Test func aFullSpoolKeepsWhatFitsInOrder() async throws {
        let upward = RecordingUpward(.hold)
        try await BoundaryHarness.with(upward: upward, spoolBytes: 4096) { harness in
            let socket = try harness.connect()
            // From a thread of its own: a blocking send must not hold a cooperative thread.
            await onThread {
                for batch in 0..<400 { socket.send(Boundary.v1(Boundary.request(["https://f.invalid/\(batch)"]))) }
            }
            #expect(await eventually(timeout: .seconds(60)) { harness.forwarder.enqueuedBatches == 400 }, "every batch read")
            let held = harness.forwarder.accounting
            #expect(held.received == 400)
            #expect(held.inFlight + held.queued + held.spooled + held.dropped == 400, "every batch read is somewhere or counted: \(held)")
            #expect(held.inFlight + held.queued >= 100 && held.spooled > 0 && held.dropped > 0, "memory, then spool, then dropped: \(held)")
            upward.release()
            #expect(await eventually(timeout: .seconds(60)) { harness.forwarder.isDrained }, "everything held was delivered")
            let urls = upward.urls
            #expect(urls.count == held.inFlight + held.queued + held.spooled, "what was in memory and in the spool, each once: \(held)")
            let numbers = urls.compactMap { Int($0.split(separator: "/").last ?? "") }
            #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count, "in order, each once")
            #expect(urls.count + (harness.forwarder.droppedBatches["spool_full"] ?? 0) == 400, "exactly the excess was dropped and counted")
        }
    }

    @Test func batchesOverTheControlPlanesLimitAreSplit() async throws {
        let upward = RecordingUpward()
        try await BoundaryHarness.with(upward: upward) { harness in
            harness.forwarder.enqueue(Boundary.request((0..<2500).map { "https://s.invalid/\($0)" }))
            #expect(await eventually { upward.batches.count == 3 })
            #expect(upward.batches.map(\.entries.count) == [1000, 1000, 500])
        }
    }

    @Test func aRefusedBatchIsNotRetriedAndTheNextIsDelivered() async throws {
        let upward = RecordingUpward(.reject(1))
        try await BoundaryHarness.with(upward: upward) { harness in
            let socket = try harness.connect()
            socket.send(Boundary.v1(Boundary.request(["https://a.invalid/", "https://b.invalid/"])))
            #expect(await eventually { upward.rejections == 1 })
            socket.send(Boundary.v1(Boundary.request(["https://c.invalid/"])))
            #expect(await eventually { upward.urls == ["https://c.invalid/"] }, "not retried; the next is delivered")
        }
    }

    @Test func theSocketIsPrivateAStaleOneIsReplacedAndALiveOneIsNotTaken() async throws {
        let directory = NSTemporaryDirectory() + "boundary-sock-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A stale socket file: bound, then its listener gone.
        makeStaleSocket(directory + "/audit.sock")
        try await BoundaryHarness.with(directory: directory) { harness in
            var info = stat()
            #expect(stat(harness.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            // A second server on the same live path does not take it over.
            let second = BoundarySocketServer(configuration: .init(path: harness.path), forwarder: harness.forwarder)
            try await second.run()
            #expect(!second.isListening)
            let socket = try harness.connect()
            socket.send(Boundary.v1(Boundary.request(["https://live.invalid/"])))
            #expect(await eventually { harness.upward.urls == ["https://live.invalid/"] })
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/audit.sock"), "removed at shutdown")
    }

    @Test func sequenceGapsAndRepeatsArePerSession() {
        var tracker = SequenceTracker()
        #expect(tracker.check(session: "", numbers: [5, 1]) == [], "no session: not tracked")
        #expect(tracker.check(session: "a", numbers: [0, 1, 2]) == [])
        #expect(tracker.check(session: "a", numbers: [6, 7]) == [.missing(from: 3, through: 5, count: 3)])
        #expect(tracker.check(session: "a", numbers: [7]) == [.repeated(7)])
        #expect(tracker.check(session: "b", numbers: [0]) == [])
    }

    /// A client that goes away in the middle of a frame loses only that frame.
    @Test func aClientThatVanishesMidFrameLosesOnlyThatFrame() async throws {
        try await BoundaryHarness.with { harness in
            var vanishing: LoopbackSocket? = try harness.connect()
            let frame = Boundary.v2(Boundary.request(["https://whole.invalid/"])) + Boundary.v2(Boundary.request(["https://cut.invalid/"]))
            vanishing?.send(Array(frame.dropLast(5)))
            vanishing = nil
            let other = try harness.connect()
            other.send(Boundary.v1(Boundary.request(["https://other.invalid/"])))
            #expect(await eventually { Set(harness.upward.urls) == ["https://whole.invalid/", "https://other.invalid/"] })
            _ = vanishing
        }
    }

    /// A torn spool record ends its segment (logged, counted) and the next segment is read.
    @Test func aTornSpoolSegmentIsSkipped() throws {
        let directory = NSTemporaryDirectory() + "boundary-torn-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        do {
            let spool = BoundarySpool(directory: directory, maxBytes: 1 << 20, logger: quiet)
            #expect(spool.append(Array("first".utf8)) && spool.append(Array("second".utf8)))
        }
        // Tear the end of the only segment: its second record's checksum no longer matches.
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).first)
        let handle = try #require(FileHandle(forUpdatingAtPath: directory + "/" + segment))
        handle.seekToEndOfFile()
        handle.seek(toFileOffset: handle.offsetInFile - 2)
        handle.write(Data("XX".utf8))
        handle.closeFile()
        let spool = BoundarySpool(directory: directory, maxBytes: 1 << 20, logger: quiet)
        #expect(spool.next()?.payload == Array("first".utf8))
        #expect(spool.next() == nil, "the torn record and the rest of its segment are skipped")
        #expect(spool.isEmpty)
        #expect(spool.append(Array("third".utf8)) && spool.next()?.payload == Array("third".utf8), "and the spool goes on")
    }

    /// Stray names in the spool's directory (numbers at Int64's ends) are not segments: the
    /// next segment's number cannot overflow.
    @Test func strayNamesInTheSpoolAreIgnored() throws {
        let directory = NSTemporaryDirectory() + "boundary-stray-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for name in ["9223372036854775807.seg", "-9223372036854775808.seg", "x.seg"] {
            #expect(FileManager.default.createFile(atPath: directory + "/" + name, contents: Data([1, 2, 3])))
        }
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let spool = BoundarySpool(directory: directory, maxBytes: 1 << 20, logger: quiet)
        #expect(spool.isEmpty)
        #expect(spool.append(Array("kept".utf8)))
        #expect(spool.next()?.payload == Array("kept".utf8))
    }

    /// A service group cancelled without a graceful shutdown (a parent task cancelled, a
    /// test's time limit) still ends: the server and the forwarder stop on cancellation too.
    @Test func aCancelledGroupEnds() async throws {
        let directory = NSTemporaryDirectory() + "boundary-cancel-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let forwarder = BoundaryForwarder(upward: RecordingUpward(), spool: nil)
        let server = BoundarySocketServer(configuration: .init(path: directory + "/audit.sock"), forwarder: forwarder)
        let group = ServiceGroup(configuration: .init(services: [forwarder, server], logger: quiet))
        let ended = Atomic(false)
        let running = Task {
            try? await group.run()
            ended.store(true, ordering: .relaxed)
        }
        #expect(await eventually { server.isListening })
        running.cancel()
        // Bounded: a group that does not end fails here instead of holding the test run.
        #expect(await eventually(timeout: .seconds(10)) { ended.load(ordering: .relaxed) }, "the cancelled group ended")
        #expect(!server.isListening)
    }
}

/// The connection handler's log lines against a flood: empty messages and a frame of a
/// thousand gaps cost a few lines, while the metrics and the forwarder see everything.
struct BoundaryConnectionLogTests {
    @Test func aFloodOfBadFramesCostsAFewLogLines() throws {
        let logs = CapturedLog()
        let forwarder = BoundaryForwarder(upward: RecordingUpward(), spool: nil)
        let channel = EmbeddedChannel(handler: BoundaryConnectionHandler(forwarder: forwarder, logger: logs.logger))
        let empty = try Coder_Boundarylogproxy_Codec_V1_BoundaryMessage().serializedBytes() as [UInt8]
        for _ in 0..<1000 { try channel.writeInbound(BoundaryFrame.v2(ByteBuffer(bytes: empty))) }
        var gapped = Coder_Agent_V2_ReportBoundaryLogsRequest()
        gapped.sessionID = String(repeating: "s", count: 16_000)
        gapped.logs = (0..<2000).map { i in
            var log = Coder_Agent_V2_BoundaryLog()
            log.sequenceNumber = Int32(i * 2)
            return log
        }
        let warnings = logs.all.filter { $0.level == .warning }
        #expect(warnings.count == BoundaryConnectionHandler.maxWarningsPerMinute, "\(warnings.count) lines")
        _ = try channel.finish()

        let gapLogs = CapturedLog()
        let other = EmbeddedChannel(handler: BoundaryConnectionHandler(forwarder: forwarder, logger: gapLogs.logger))
        try other.writeInbound(BoundaryFrame.v1(ByteBuffer(bytes: try gapped.serializedBytes() as [UInt8])))
        let gaps = gapLogs.all.filter { $0.level == .warning }
        #expect(gaps.count == 1, "one line for the frame's 1 999 gaps: \(gaps.count)")
        #expect(gaps.first?.metadata["count"] == "1999" && gaps.first?.metadata["session_id"]?.count == 64)
        _ = try other.finish()
    }
}

/// The forwarder's memory queue is bounded in log entries as well as batches: a batch of
/// 16 000 empty entries (32 KiB encoded, far more decoded) fills it alone; the next goes to
/// the spool, nothing is dropped.
struct BoundaryForwarderMemoryTests {
    @Test func batchesOfManyEntriesGoToTheSpool() throws {
        let directory = NSTemporaryDirectory() + "boundary-entries-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let forwarder = BoundaryForwarder(
            upward: RecordingUpward(), spool: BoundarySpool(directory: directory, maxBytes: 64 << 20, logger: quiet))
        var batch = Coder_Agent_V2_ReportBoundaryLogsRequest()
        batch.logs = Array(repeating: Coder_Agent_V2_BoundaryLog(), count: 16_000)
        for _ in 0..<10 { forwarder.enqueue(batch) }
        let accounting = forwarder.accounting
        #expect(accounting.queued == 1, "\(accounting)")
        #expect(accounting.spooled == 9 && accounting.dropped == 0, "\(accounting)")
    }
}
