import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import DRPC
import Logging
import Synchronization
import Testing

/// Work that lives on the upward session (``UpwardParticipant``), against
/// the double over the real wire format (WebSocket, yamux, dRPC) with a test service of its own.
@Suite(.timeLimit(.minutes(3)))
struct UpwardParticipantTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// How long a wait may take: the whole suite on a loaded 2-core host took 40-50 s for
    /// what takes under a second alone (a passing wait returns at once).
    static let patience: Duration = .seconds(90)

    static let chat = "/test.v1.Test/Chat"
    static let ticks = "/test.v1.Test/Ticks"
    static let echo = "/test.v1.Test/Echo"
    static let flood = "/test.v1.Test/Flood"
    static let sum = "/test.v1.Test/Sum"

    func makeSession(_ url: String, token: String, participants: [any UpwardParticipant]) -> ControlPlaneSession {
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = .seconds(30)
        return ControlPlaneSession(
            configuration: configuration, dialer: WebSocketDialer(baseURL: url, token: token, version: "2.10", logger: Self.quiet),
            logger: Self.quiet, participants: UpwardParticipants(participants))
    }

    /// A bidirectional stream both ways; the participant is stopped when the double drops
    /// the connection and started again on the next session.
    @Test func bidiStreamIsStoppedOnADropAndRestartedOnReconnect() async throws {
        let double = ControlPlaneDouble()
        let heard = Mutex<[String]>([])
        // Answers every message twice: an echo, then its length (the server speaks on its own
        // too, not only in lockstep).
        double.handleStream(Self.chat) { call in
            while let message = try await call.receive() {
                let text = String(decoding: message, as: UTF8.self)
                heard.withLock { $0.append(text) }
                try await call.send(Array("echo \(text)".utf8))
                try await call.send(Array("\(message.count) bytes".utf8))
            }
        }
        let log = ParticipantLog()
        try await double.run { url in
            let session = makeSession(url, token: double.token, participants: [ChatParticipant(log: log)])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Self.patience) { log.events.contains("1: 7 bytes") })
            #expect(log.events.prefix(3) == ["start 1", "1: echo hello 1", "1: 7 bytes"])
            #expect(heard.withLock { $0 } == ["hello 1"])

            await double.dropConnections()
            #expect(await eventually(timeout: Self.patience) { log.events.contains { $0.hasPrefix("stop 1") } }, "\(log.events)")
            #expect(await eventually(timeout: Self.patience) { log.events.contains("2: 7 bytes") }, "\(log.events)")
            #expect(heard.withLock { $0 } == ["hello 1", "hello 2"])
            let events = log.events
            let stop = try #require(events.firstIndex { $0.hasPrefix("stop 1") })
            let restart = try #require(events.firstIndex(of: "start 2"))
            #expect(stop < restart, "stopped before the next session started it: \(events)")

            session.beginShutdown()
            try await running.value
            #expect(log.events.contains { $0.hasPrefix("stop 2") }, "stopped at shutdown: \(log.events)")
        }
    }

    /// A server stream delivers its messages in order and ends; a client stream (a bidi
    /// stream used one way: messages, CloseSend, one reply), a unary call and an RPC the
    /// control plane does not serve, on the same session.
    @Test func serverStreamClientStreamUnaryAndUnsupported() async throws {
        let double = ControlPlaneDouble()
        double.handleServerStream(Self.ticks) { request, call in
            for tick in 0..<Int(request.first ?? 0) { try await call.send(Array("tick \(tick)".utf8)) }
        }
        double.handleStream(Self.sum) { call in
            var total = 0
            while let message = try await call.receive() { total += message.count }
            try await call.send(Array("sum \(total)".utf8))
        }
        double.handle(Self.echo) { request in Array("echo: ".utf8) + request }
        let results = Mutex<[String]>([])
        let done = TestFlag()
        let probe = ClosureParticipant(name: "probe") { session in
            var ticks: [String] = []
            for try await message in try await session.serverStream(Self.ticks, request: [5]) {
                ticks.append(String(decoding: message, as: UTF8.self))
            }
            let upload = try await session.bidiStream(Self.sum)
            for part in ["a", "bb", "ccc"] { try await upload.send(Array(part.utf8)) }
            try await upload.closeSend()
            let summed = try await upload.messages.next().map { String(decoding: $0, as: UTF8.self) } ?? "none"
            let ended = try await upload.messages.next() == nil ? "ended" : "more"
            let echoed = try await session.unary(Self.echo, request: Array("hi".utf8))
            var unsupported = "served"
            do {
                _ = try await session.unary("/test.v1.Test/Missing", request: [])
            } catch {
                unsupported = (error as? UpwardStreamError)?.kind == .unsupported ? "unsupported" : "\(error)"
            }
            results.withLock { $0 = ticks + [summed, ended, String(decoding: echoed, as: UTF8.self), unsupported, "session \(session.number)"] }
            done.set()
        }
        try await double.run { url in
            let session = makeSession(url, token: double.token, participants: [probe])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Self.patience) { done.isSet })
            #expect(
                results.withLock { $0 } == [
                    "tick 0", "tick 1", "tick 2", "tick 3", "tick 4", "sum 6", "ended", "echo: hi", "unsupported", "session 1",
                ])
            session.beginShutdown()
            try await running.value
        }
    }

    /// A participant that does not read holds at most the stream's window: the control
    /// plane's sender waits for credit (it cannot finish its 64 messages of 64 KiB), the rest
    /// of the session goes on, and reading later gets every message, in order.
    @Test func aParticipantThatDoesNotReadIsHeldAtTheWindow() async throws {
        let double = ControlPlaneDouble()
        let sent = Atomic(0)
        let messages = 64
        let size = 64 << 10
        double.handleServerStream(Self.flood) { _, call in
            for index in 0..<messages {
                try await call.send([UInt8](repeating: UInt8(index), count: size))
                sent.add(1, ordering: .relaxed)
            }
        }
        double.handle(Self.echo) { request in request }
        let opened = TestFlag()
        let roundTrips = Atomic(0)
        let readNow = TestFlag()
        let received = Mutex<[UInt8]>([])
        let slow = ClosureParticipant(name: "slow reader") { session in
            let stream = try await session.serverStream(Self.flood, request: [1])
            opened.set()
            // Not reading: other calls on the session still go through.
            while !readNow.isSet {
                _ = try await session.unary(Self.echo, request: [1])
                roundTrips.add(1, ordering: .relaxed)
                try await Task.sleep(for: .milliseconds(20))
            }
            for try await message in stream {
                let intact = message.count == size && message.allSatisfy { $0 == message[0] }
                received.withLock { $0.append(intact ? message[0] : 0xFF) }
            }
        }
        try await double.run { url in
            let session = makeSession(url, token: double.token, participants: [slow])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Self.patience) { opened.isSet && sent.load(ordering: .relaxed) >= 3 })
            // Many round trips later the sender is still held: the window (256 KiB) holds
            // three of these messages and part of a fourth.
            let trips = roundTrips.load(ordering: .relaxed)
            #expect(await eventually(timeout: Self.patience) { roundTrips.load(ordering: .relaxed) >= trips + 10 })
            let held = sent.load(ordering: .relaxed)
            #expect(held <= UpwardStreamLimits.receiveWindowBytes / size, "the control plane sent \(held) messages nobody read")
            readNow.set()
            #expect(await eventually(timeout: Self.patience) { received.withLock { $0.count } == messages })
            #expect(received.withLock { $0 } == (0..<messages).map { UInt8($0) })
            session.beginShutdown()
            try await running.value
        }
    }

    /// At most ``UpwardStreamLimits/maxStreams`` streams per participant; one that ends
    /// gives its place back.
    @Test func streamsPerParticipantAreBounded() async throws {
        let double = ControlPlaneDouble()
        double.handleStream(Self.chat) { call in
            while try await call.receive() != nil {}
        }
        let outcome = Mutex<String>("")
        let done = TestFlag()
        let greedy = ClosureParticipant(name: "greedy") { session in
            var streams: [UpwardBidiStream] = []
            for _ in 0..<UpwardStreamLimits.maxStreams { streams.append(try await session.bidiStream(Self.chat)) }
            var result: [String] = []
            do {
                _ = try await session.bidiStream(Self.chat)
                result.append("opened one too many")
            } catch let error as UpwardStreamError {
                result.append("\(error.kind)")
            }
            await streams.removeLast().cancel()
            let again = try await session.bidiStream(Self.chat)
            try await again.send(Array("still works".utf8))
            result.append("reopened")
            outcome.withLock { $0 = result.joined(separator: ", ") }
            done.set()
        }
        try await double.run { url in
            let session = makeSession(url, token: double.token, participants: [greedy])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Self.patience) { done.isSet })
            #expect(outcome.withLock { $0 } == "tooManyStreams(limit: \(UpwardStreamLimits.maxStreams)), reopened")
            session.beginShutdown()
            try await running.value
        }
    }

    /// A participant that returns with a stream still open: the stream is closed after what
    /// it sent (the control plane's handler gets the message, then sees the stream end without
    /// a CloseSend) while the session itself stays up.
    @Test func streamsLeftOpenAreResetWhenTheParticipantEnds() async throws {
        let double = ControlPlaneDouble()
        let handlerEnd = Mutex<String?>(nil)
        let heard = TestFlag()
        double.handleStream(Self.chat) { call in
            do {
                while try await call.receive() != nil { heard.set() }
                handlerEnd.withLock { $0 = "CloseSend" }
            } catch {
                handlerEnd.withLock { $0 = "\(error)" }
                throw error
            }
        }
        let leaver = ClosureParticipant(name: "leaver") { session in
            let stream = try await session.bidiStream(Self.chat)
            try await stream.send(Array("bye".utf8))
            // Returns at once, without closing the stream.
        }
        try await double.run { url in
            let session = makeSession(url, token: double.token, participants: [leaver])
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: Self.patience) { heard.isSet })
            #expect(await eventually(timeout: Self.patience) { handlerEnd.withLock { $0 } != nil })
            #expect(handlerEnd.withLock { $0 } == "drpc: EOF", "ended by the agent, without a CloseSend")
            #expect(session.isConnected, "the session stays up")
            #expect(double.recorded.withLock { $0.connections } == 1)
            session.beginShutdown()
            try await running.value
        }
    }

    /// Standalone (no control plane), participants never start.
    @Test func standaloneStartsNoParticipant() async throws {
        let log = ParticipantLog()
        let session = ControlPlaneSession(
            configuration: .init(agentVersion: "0.1.0"), dialer: nil, logger: Self.quiet,
            participants: UpwardParticipants([ChatParticipant(log: log)]))
        let running = Task { try await session.run() }
        #expect(await eventually(timeout: Self.patience) { session.currentManifest == nil && !session.isConnected })
        session.beginShutdown()
        try await running.value
        #expect(log.events.isEmpty)
    }
}

/// What participants did, in order.
final class ParticipantLog: Sendable {
    private let list = Mutex<[String]>([])
    func append(_ event: String) { list.withLock { $0.append(event) } }
    var events: [String] { list.withLock { $0 } }
}

/// Opens a bidirectional chat, says hello, then records whatever arrives until it is stopped.
struct ChatParticipant: UpwardParticipant {
    let log: ParticipantLog
    var name: String { "chat" }

    func run(on session: any UpwardSession) async throws {
        let number = session.number
        log.append("start \(number)")
        var reason = "returned"
        defer { log.append("stop \(number): \(reason)") }
        do {
            let stream = try await session.bidiStream(UpwardParticipantTests.chat)
            try await stream.send(Array("hello \(number)".utf8))
            for try await message in stream.messages {
                log.append("\(number): \(String(decoding: message, as: UTF8.self))")
            }
        } catch {
            reason = "\(error.kind)"
            throw error
        }
    }
}

/// A participant made of a closure.
struct ClosureParticipant: UpwardParticipant {
    let name: String
    let body: @Sendable (any UpwardSession) async throws -> Void

    func run(on session: any UpwardSession) async throws {
        try await body(session)
    }
}
