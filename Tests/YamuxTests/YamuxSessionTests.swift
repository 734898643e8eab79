import AgentTestSupport
import NIOCore
import Synchronization
import Testing
import Yamux

/// One end of an in-memory byte pipe; what one side writes the other side's session receives,
/// re-split into pieces of 1 to 7 bytes or whole, as a WebSocket or socket might deliver it.
final class PipeEnd: YamuxTransport {
    let outbound: AsyncStream<[UInt8]>.Continuation
    let written = Mutex(0)
    let writes = Mutex(0)
    let closed = Mutex(false)

    init(_ outbound: AsyncStream<[UInt8]>.Continuation) { self.outbound = outbound }

    func write(_ buffer: ByteBuffer) {
        let bytes = Array(buffer.readableBytesView)
        if closed.withLock({ $0 }) { return }
        written.withLock { $0 += bytes.count }
        writes.withLock { $0 += 1 }
        outbound.yield(bytes)
    }

    func close() {
        closed.withLock { $0 = true }
        outbound.finish()
    }
}

/// A connected client/server pair with pumps; `split` re-chunks every write.
struct SessionPair {
    let client: YamuxSession
    let server: YamuxSession
    let clientEnd: PipeEnd
    let serverEnd: PipeEnd
    let pumps: [Task<Void, Never>]

    init(split: Bool = false, configuration: YamuxSession.Configuration = .init()) async {
        let (toServer, toServerSink) = AsyncStream<[UInt8]>.makeStream()
        let (toClient, toClientSink) = AsyncStream<[UInt8]>.makeStream()
        clientEnd = PipeEnd(toServerSink)
        serverEnd = PipeEnd(toClientSink)
        client = YamuxSession(role: .client, transport: clientEnd, configuration: configuration)
        server = YamuxSession(role: .server, transport: serverEnd, configuration: configuration)
        func pump(_ stream: AsyncStream<[UInt8]>, into session: YamuxSession) -> Task<Void, Never> {
            Task {
                var size = 1
                for await bytes in stream {
                    if split {
                        var offset = 0
                        while offset < bytes.count {
                            let end = min(bytes.count, offset + size)
                            await session.receive(Array(bytes[offset..<end]))
                            offset = end
                            size = size % 7 + 1
                        }
                    } else {
                        await session.receive(bytes)
                    }
                }
                await session.transportClosed()
            }
        }
        pumps = [pump(toServer, into: server), pump(toClient, into: client)]
    }

    func shutdown() async {
        await client.close()
        await server.close()
        for pump in pumps { await pump.value }
    }
}

/// Reads a stream to EOF (bounded by `limit` bytes).
func readAll(_ stream: YamuxStream, limit: Int = 8 << 20) async throws -> [UInt8] {
    var out: [UInt8] = []
    while let chunk = try await stream.read() {
        out += chunk
        if out.count > limit { break }
    }
    return out
}

@Suite(.timeLimit(.minutes(3)))
struct YamuxSessionTests {
    @Test func openWriteFinEchoWithOneByteSplits() async throws {
        let pair = await SessionPair(split: true)
        let stream = try await pair.client.open()
        #expect(stream.id == 1)
        try await stream.write(Array("hello".utf8))
        await stream.closeWrite()
        let accepted = try #require(await pair.server.accept())
        #expect(accepted.id == 1)
        #expect(try await readAll(accepted) == Array("hello".utf8))
        try await accepted.write(Array("world".utf8))
        await accepted.closeWrite()
        #expect(try await readAll(stream) == Array("world".utf8))
        #expect(try await pair.client.open().id == 3)
        await pair.shutdown()
    }

    /// 1 MiB on one stream: the writer stops at the 256 KiB window until the reader reads.
    @Test func flowControlPausesAtTheWindow() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let writer = Task {
            try await stream.write(payload); await stream.closeWrite()
        }
        let accepted = try #require(await pair.server.accept())
        // Nothing is read yet: the sender must stop at the window.
        try await Task.sleep(for: .milliseconds(300))
        let sentBeforeReading = pair.clientEnd.written.withLock { $0 }
        #expect(sentBeforeReading <= Int(YamuxHeader.initialWindow) + 64 * 12 + 64)
        #expect(try await readAll(accepted) == payload)
        try await writer.value
        await pair.shutdown()
    }

    /// 50 concurrent streams; one is never read, the others finish anyway.
    @Test func fiftyStreamsWithOneStalled() async throws {
        let pair = await SessionPair()
        let server = Task {
            var results: [UInt32: Int] = [:]
            for _ in 0..<50 {
                guard let stream = await pair.server.accept() else { break }
                if stream.id == 1 { continue }  // stalled: never read
                results[stream.id] = try await readAll(stream).count
                if results.count == 49 { break }
            }
            return results
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<50 {
                let stream = try await pair.client.open()
                group.addTask {
                    let size = stream.id == 1 ? 600 * 1024 : 100 * 1024
                    try await stream.write([UInt8](repeating: UInt8(stream.id & 0xFF), count: size))
                    await stream.closeWrite()
                }
                if stream.id == 1 { continue }
            }
            // The stalled stream's writer blocks on its window; wait for the others only.
            let results = try await server.value
            #expect(results.count == 49)
            #expect(results.values.allSatisfy { $0 == 100 * 1024 })
            await pair.shutdown()
            group.cancelAll()
        }
    }

    /// Pings are answered ahead of queued bulk data.
    @Test func pingIsAnsweredDuringBulkTransfer() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        let accepted = Task { await pair.server.accept() }
        let bulk = Task { try await stream.write([UInt8](repeating: 1, count: 4 << 20)) }
        let reader = Task {
            let s = try #require(await accepted.value)
            var total = 0
            while total < 4 << 20, let chunk = try await s.read() { total += chunk.count }
            return total
        }
        // The pings' own deadline is a bound for a hung session, not the property tested
        // (that they are answered while bulk data is queued): generous for a loaded host.
        for _ in 0..<5 { try await pair.server.ping(timeout: .seconds(120)) }
        for _ in 0..<5 { try await pair.client.ping(timeout: .seconds(120)) }
        #expect(try await reader.value == 4 << 20)
        try await bulk.value
        await pair.shutdown()
    }

    @Test func resetMidStream() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        try await stream.write([1, 2, 3])
        let accepted = try #require(await pair.server.accept())
        #expect(try await accepted.read() == [1, 2, 3])
        await stream.reset()
        await #expect(throws: YamuxSessionError.streamReset) { try await accepted.read() }
        await #expect(throws: YamuxSessionError.streamReset) { try await stream.write([4]) }
        // The session survives.
        let other = try await pair.client.open()
        try await other.write([9])
        await other.closeWrite()
        let next = try #require(await pair.server.accept())
        #expect(try await readAll(next) == [9])
        await pair.shutdown()
    }

    @Test func dataForUnknownStreamIsDiscarded() async throws {
        let pair = await SessionPair()
        await pair.server.receive(YamuxFrame(header: YamuxHeader(type: .data, streamID: 77, length: 3), payload: [1, 2, 3]).encoded)
        #expect(await pair.server.closeReason == nil)
        try await pair.client.ping(timeout: .seconds(120))
        await pair.shutdown()
    }

    @Test func goAwayNormalBlocksNewOpens() async throws {
        let pair = await SessionPair()
        await pair.server.goAway(.normal)
        try await pair.client.ping(timeout: .seconds(120))  // the GoAway was sent before the ping's reply
        await #expect(throws: YamuxSessionError.remoteGoAway) { try await pair.client.open() }
        #expect(await pair.client.closeReason == nil)
        await pair.shutdown()
    }

    @Test func goAwayProtocolErrorEndsTheSession() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        await pair.server.goAway(.protocolError)
        #expect(await eventuallyClosed(pair.client))
        await #expect(throws: (any Error).self) { try await stream.read() }
        await pair.shutdown()
    }

    @Test func windowViolationIsFatal() async throws {
        var config = YamuxSession.Configuration()
        config.window = 1024
        let pair = await SessionPair(configuration: config)
        _ = try await pair.client.open()
        _ = await pair.server.accept()
        // Hand-craft a Data frame larger than the 1 KiB window.
        await pair.server.receive(YamuxFrame(header: YamuxHeader(type: .data, streamID: 1, length: 1000), payload: [UInt8](repeating: 0, count: 1000)).encoded)
        await pair.server.receive(YamuxFrame(header: YamuxHeader(type: .data, streamID: 1, length: 1000), payload: [UInt8](repeating: 0, count: 1000)).encoded)
        #expect(await pair.server.closeReason != nil)
        await pair.shutdown()
    }

    @Test func duplicateSYNIsAProtocolError() async throws {
        let pair = await SessionPair()
        let syn = YamuxHeader(type: .windowUpdate, flags: .syn, streamID: 5, length: 0).encoded
        await pair.server.receive(syn)
        #expect(await pair.server.closeReason == nil)
        await pair.server.receive(syn)
        if case .protocolError? = await pair.server.closeReason {} else { Issue.record("expected a protocol error") }
        await pair.shutdown()
    }

    @Test func backlogOverflowIsRefusedWithRST() async throws {
        var config = YamuxSession.Configuration()
        config.acceptBacklog = 2
        let pair = await SessionPair(configuration: config)
        let streams = try await (0..<3).asyncMap { _ in try await pair.client.open() }
        // A ping's answer crosses the pair's pumps, tasks on the cooperative pool: on a busy
        // host that took longer than the default ten seconds.
        try await pair.client.ping(timeout: .seconds(120))
        try await pair.server.ping(timeout: .seconds(120))
        await #expect(throws: YamuxSessionError.streamReset) { try await streams[2].read() }
        await pair.shutdown()
    }

    @Test func eofEndsEverything() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        await pair.server.close()
        await #expect(throws: YamuxSessionError.sessionClosed) { try await stream.read() }
        #expect(await pair.client.accept() == nil)
        await pair.shutdown()
    }

    /// SYN and data leave in one write; the ACK rides with the reply.
    @Test func framesOfOneRoundTripShareWrites() async throws {
        var configuration = YamuxSession.Configuration()
        configuration.lazyDelay = .seconds(30)  // longer than any scheduling hiccup under load
        let pair = await SessionPair(configuration: configuration)
        let stream = try await pair.client.open()
        try await stream.write([1, 2, 3])
        let accepted = try #require(await pair.server.accept())
        #expect(try await accepted.read() == [1, 2, 3])
        #expect(pair.clientEnd.writes.withLock { $0 } == 1)
        try await accepted.write([4])
        #expect(try await stream.read() == [4])
        #expect(pair.serverEnd.writes.withLock { $0 } == 1)
        await pair.shutdown()
    }

    /// A FIN with nothing to ride with still leaves, after the lazy delay.
    @Test func aLoneFinStillLeaves() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        try await stream.write([1])
        let accepted = try #require(await pair.server.accept())
        #expect(try await accepted.read() == [1])
        await stream.closeWrite()
        #expect(try await accepted.read() == nil)
        await pair.shutdown()
    }

    /// Push mode: accepted streams and their data go to handlers on the loop.
    @Test func acceptHandlerAndSinkReceiveInOrder() async throws {
        let pair = await SessionPair(split: true)
        let log = EventLog()
        await pair.server.installRecorder(log)
        for i in 0..<3 {
            let stream = try await pair.client.open()
            try await stream.write(Array("msg\(i)".utf8))
            await stream.closeWrite()
        }
        #expect(await eventually { log.events.withLock { $0.filter { $0.hasPrefix("end") }.count } == 3 })
        let seen = log.events.withLock { $0 }
        for id in [1, 3, 5] {
            let mine = seen.filter { $0.hasSuffix(" \(id)") }
            #expect(mine.first == "accept \(id)")
            #expect(mine.last == "end \(id)")
        }
        let data = seen.filter { $0.hasPrefix("data") }.joined()
        #expect(data.count > 0)
        await pair.shutdown()
    }

    /// tryWrite takes what fits the window now, and nothing of what does not.
    @Test func tryWriteRespectsTheWindow() async throws {
        let pair = await SessionPair()
        let stream = try await pair.client.open()
        let tooBig = [UInt8](repeating: 0, count: Int(YamuxHeader.initialWindow) + 1)
        #expect(try await pair.client.tryWrite(stream.id, tooBig) == false)
        #expect(try await pair.client.tryWrite(stream.id, [9, 9]) == true)
        let accepted = try #require(await pair.server.accept())
        #expect(try await accepted.read() == [9, 9])
        await stream.reset()
        await #expect(throws: YamuxSessionError.streamReset) { _ = try await pair.client.tryWrite(stream.id, [1]) }
        await pair.shutdown()
    }

    /// A stream the peer never acknowledges ends the session (Go: 75 s).
    @Test func unacknowledgedOpenEndsTheSession() async throws {
        let (sink, continuation) = AsyncStream<[UInt8]>.makeStream()
        _ = sink
        var configuration = YamuxSession.Configuration()
        configuration.streamOpenTimeout = .milliseconds(200)
        configuration.sweepInterval = .milliseconds(50)
        let session = YamuxSession(role: .client, transport: PipeEnd(continuation), configuration: configuration)
        _ = try await session.open()
        #expect(await eventuallyClosed(session))
        guard case .protocolError = await session.closeReason else {
            Issue.record("expected a protocol error, got \(String(describing: await session.closeReason))")
            return
        }
    }

    /// A stream we closed that the peer never closes is reset and forgotten (Go: 5 min).
    @Test func neverClosedStreamIsResetAndForgotten() async throws {
        var configuration = YamuxSession.Configuration()
        configuration.streamCloseTimeout = .milliseconds(200)
        configuration.sweepInterval = .milliseconds(50)
        let pair = await SessionPair(configuration: configuration)
        let stream = try await pair.client.open()
        try await stream.write([1])
        let accepted = try #require(await pair.server.accept())
        #expect(try await accepted.read() == [1])
        // The client closes; the server never closes its side, so the client gives up on it
        // (nothing below races the timeout: whichever comes first, the end is the same).
        await stream.closeWrite()
        #expect(await eventually { await pair.client.streamCount == 0 })
        // The reset still has to reach the server: under load its next write may come first.
        var reset = false
        _ = await eventually {
            do {
                try await accepted.write([2])
                return false
            } catch {
                reset = (error as? YamuxSessionError) == .streamReset
                return true
            }
        }
        #expect(reset, "the server's side was not reset")
        #expect(await pair.client.closeReason == nil)
        await pair.shutdown()
    }

    @Test func unansweredPingTimesOut() async throws {
        // A peer that reads nothing: the transport swallows every write.
        let (sink, continuation) = AsyncStream<[UInt8]>.makeStream()
        _ = sink
        let session = YamuxSession(role: .client, transport: PipeEnd(continuation))
        await #expect(throws: YamuxSessionError.pingTimeout) { try await session.ping(timeout: .milliseconds(100)) }
        #expect(await session.closeReason == nil)
        await session.close()
    }

    func eventuallyClosed(_ session: YamuxSession) async -> Bool {
        for _ in 0..<200 {
            if await session.closeReason != nil { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}

final class EventLog: Sendable {
    let events = Mutex<[String]>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
}

extension YamuxSession {
    /// Records accepted streams and their sink events as "accept N", "data N", "end N".
    func installRecorder(_ log: EventLog) {
        setAcceptHandler { stream in
            log.add("accept \(stream.id)")
            self.setSink(stream.id) { event in
                switch event {
                case .data: log.add("data \(stream.id)")
                case .end: log.add("end \(stream.id)")
                case .failed: log.add("failed \(stream.id)")
                }
            }
        }
    }
}
