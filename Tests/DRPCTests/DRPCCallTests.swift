import AgentTestSupport
import DRPC
import NIOCore
import Synchronization
import Testing
import Yamux

/// A byte queue with one waiting reader; `finish` makes reads return nil once drained.
final class ByteInbox: Sendable {
    private struct State {
        var chunks: [[UInt8]] = []
        var finished = false
        var waiter: CheckedContinuation<[UInt8]?, Never>?
    }
    private let state = Mutex(State())

    func yield(_ bytes: [UInt8]) {
        let waiter = state.withLock { s -> CheckedContinuation<[UInt8]?, Never>? in
            guard !s.finished else { return nil }
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.chunks.append(bytes)
            return nil
        }
        waiter?.resume(returning: bytes)
    }

    func finish() {
        let waiter = state.withLock { s -> CheckedContinuation<[UInt8]?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    func next() async -> [UInt8]? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> ([UInt8]?, Bool) in
                if !s.chunks.isEmpty { return (s.chunks.removeFirst(), true) }
                if s.finished { return (nil, true) }
                s.waiter = continuation
                return (nil, false)
            }
            if ready.1 { continuation.resume(returning: ready.0) }
        }
    }
}

/// One end of an in-memory duplex byte stream that records what it wrote.
final class MemoryDuplex: DRPCTransport {
    private let inbox: ByteInbox
    private let peer: ByteInbox
    let written = Mutex<[UInt8]>([])

    private init(inbox: ByteInbox, peer: ByteInbox) {
        self.inbox = inbox
        self.peer = peer
    }

    static func pair() -> (MemoryDuplex, MemoryDuplex) {
        let a = ByteInbox()
        let b = ByteInbox()
        return (MemoryDuplex(inbox: a, peer: b), MemoryDuplex(inbox: b, peer: a))
    }

    nonisolated(nonsending) func read() async throws -> [UInt8]? { await inbox.next() }

    nonisolated(nonsending) func write(_ bytes: [UInt8]) async throws {
        written.withLock { $0 += bytes }
        peer.yield(bytes)
    }

    nonisolated(nonsending) func closeWrite() async { peer.finish() }

    nonisolated(nonsending) func close() async {
        peer.finish()
        inbox.finish()
    }
}

/// YamuxStream as a dRPC transport (what the control-plane session does upward).
struct YamuxTransportAdapter: DRPCTransport {
    let stream: YamuxStream
    nonisolated(nonsending) func read() async throws -> [UInt8]? { try await stream.read() }
    nonisolated(nonsending) func write(_ bytes: [UInt8]) async throws { try await stream.write(bytes) }
    nonisolated(nonsending) func closeWrite() async { await stream.close() }
    nonisolated(nonsending) func close() async { await stream.reset() }
}

struct DRPCCallTests {
    static let method = "/coder.agent.v2.Agent/UpdateLifecycle"
    static let request: [UInt8] = [0x0A, 0x0A, 0x08, 0x05, 0x12, 0x06, 0x08, 0x80, 0xE2, 0xCF, 0xAA, 0x06]

    func lifecycleServer() -> DRPCServer {
        var server = DRPCServer()
        // Echo the Lifecycle inside the request, as coderd does.
        server.register(Self.method) { request in Array(request.dropFirst(2)) }
        server.register("/test.Svc/Big") { request in request + request }
        server.register("/test.Svc/Unimplemented") { _ in throw DRPCErrorBody(code: 12, message: "Unimplemented") }
        server.register("/test.Svc/Fails") { _ in throw TestFailure() }
        return server
    }

    struct TestFailure: Error, CustomStringConvertible { var description: String { "workspace agent not found" } }

    @Test func goldenUnaryCallBothWays() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let server = lifecycleServer()
        let serving = Task { await server.serve(serverEnd) }
        let reply = try await DRPCClient.unary(Self.method, request: Self.request, over: client)
        #expect(reply == Array(Self.request.dropFirst(2)))
        let sent = client.written.withLock { $0 }
        #expect(sent == [0x03, 0x01, 0x01, 0x25] + Array(Self.method.utf8) + [0x05, 0x01, 0x02, 0x0C] + Self.request + [0x0D, 0x01, 0x03, 0x00])
        #expect(serverEnd.written.withLock { $0 } == [0x05, 0x01, 0x01, 0x0A] + Array(Self.request.dropFirst(2)) + [0x0D, 0x01, 0x02, 0x00])
        await client.closeWrite()
        _ = await serving.value
    }

    @Test func unknownMethodIsUnsupported() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await lifecycleServer().serve(serverEnd) }
        do {
            _ = try await DRPCClient.unary("/coder.agent.v2.Agent/Nope", request: [], over: client)
            Issue.record("expected an error")
        } catch {
            #expect(error.isUnsupported)
            #expect(error == .remote(DRPCErrorBody(code: 0, message: #"protocol error: unknown rpc: "/coder.agent.v2.Agent/Nope""#)))
        }
        #expect(Array(serverEnd.written.withLock { $0 }.prefix(12)) == [0x07, 0x01, 0x01, 0x41, 0, 0, 0, 0, 0, 0, 0, 0])
        await client.close()
        _ = await serving.value
    }

    @Test func handlerErrors() async throws {
        for (method, expected) in [
            ("/test.Svc/Unimplemented", DRPCErrorBody(code: 12, message: "Unimplemented")),
            ("/test.Svc/Fails", DRPCErrorBody(code: 0, message: "workspace agent not found")),
        ] {
            let (client, serverEnd) = MemoryDuplex.pair()
            let serving = Task { await lifecycleServer().serve(serverEnd) }
            await #expect(throws: DRPCCallError.remote(expected)) {
                try await DRPCClient.unary(method, request: [1], over: client)
            }
            await client.close()
            _ = await serving.value
        }
    }

    @Test func largeMessagesBothWays() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await lifecycleServer().serve(serverEnd) }
        let request = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0) }
        let reply = try await DRPCClient.unary("/test.Svc/Big", request: request, over: client)
        #expect(reply == request + request)
        await client.close()
        _ = await serving.value
    }

    @Test func replyOverTheLimitIsRefused() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await lifecycleServer().serve(serverEnd) }
        await #expect(throws: DRPCCallError.wire(.dataOverflow(limit: 1000))) {
            try await DRPCClient.unary("/test.Svc/Big", request: [UInt8](repeating: 1, count: 600), over: client, maxMessageSize: 1000)
        }
        await client.close()
        _ = await serving.value
    }

    @Test func sequentialCallsOnOneTransport() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await lifecycleServer().serve(serverEnd) }
        var bytes: [UInt8] = []
        for stream: UInt64 in [1, 2] {
            DRPCPacket(streamID: stream, messageID: 1, kind: .invoke, data: Array(Self.method.utf8)).encode(into: &bytes)
            DRPCPacket(streamID: stream, messageID: 2, kind: .message, data: Self.request).encode(into: &bytes)
            DRPCPacket(streamID: stream, messageID: 3, kind: .closeSend).encode(into: &bytes)
        }
        try await client.write(bytes)
        var reader = DRPCPacketReader()
        var packets: [DRPCPacket] = []
        while packets.count < 4, let chunk = try await client.read() {
            reader.feed(chunk)
            while let packet = try reader.next() { packets.append(packet) }
        }
        #expect(packets.map(\.streamID) == [1, 1, 2, 2])
        #expect(packets.map(\.kind) == [.message, .closeSend, .message, .closeSend])
        await client.close()
        _ = await serving.value
    }

    /// The serving loop tells its observer what the decoder knows: whether the bytes so far
    /// end inside a frame, and when each call begins and ends.
    @Test func theObserverHearsFramesAndCallsFromTheDecoder() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let observer = RecordingObserver()
        let serving = Task { await lifecycleServer().serve(serverEnd, observer: observer) }
        var call: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(Self.method.utf8)).encode(into: &call)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: Self.request).encode(into: &call)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &call)
        // Half the Invoke frame: the decoder holds a frame's start.
        try await client.write(Array(call.prefix(5)))
        #expect(await eventually { observer.events.last == "mid" })
        try await client.write(Array(call.dropFirst(5)))
        #expect(await eventually { observer.events.suffix(3) == ["call", "idle-call", "between"] })
        await client.closeWrite()
        _ = await serving.value
    }

    /// A read that ends one frame and begins the next is reported as such (the next frame's
    /// deadline starts then, not at the first frame's first byte), and a unary call counts
    /// as in progress only from its CloseSend: an Invoke followed by silence holds no call.
    @Test func eachFrameHasItsOwnStartAndAnInvokeAloneIsNoCall() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let observer = RecordingObserver()
        let serving = Task { await lifecycleServer().serve(serverEnd, observer: observer) }
        var invoke: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(Self.method.utf8)).encode(into: &invoke)
        var rest: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: Self.request).encode(into: &rest)
        DRPCPacket(streamID: 1, messageID: 3, kind: .closeSend).encode(into: &rest)
        try await client.write(Array(invoke.prefix(5)))
        #expect(await eventually { observer.events.last == "mid" })
        #expect(observer.rearmed.load(ordering: .relaxed) == 0)
        try await client.write(Array(invoke.dropFirst(5)) + Array(rest.prefix(3)))
        #expect(await eventually { observer.rearmed.load(ordering: .relaxed) == 1 }, "the Invoke ended and the Message began")
        #expect(!observer.events.contains("call"), "no call before its CloseSend")
        try await client.write(Array(rest.dropFirst(3)))
        #expect(await eventually { observer.events.suffix(3) == ["call", "idle-call", "between"] })
        await client.closeWrite()
        _ = await serving.value
    }

    @Test func garbageClosesTheTransportWithoutTrapping() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await lifecycleServer().serve(serverEnd) }
        try await client.write([0x05, 0x00, 0x01, 0x00])  // stream 0: monotonicity violation
        _ = await serving.value
        #expect(try await client.read() == nil)
    }

    /// Many unary calls in parallel over one yamux session, each on its own stream; one
    /// call's handler never returns and the rest complete anyway.
    @Test func fiftyCallsOverYamuxWithOneStalled() async throws {
        let gate = AsyncStream<Void>.makeStream()
        var drpc = lifecycleServer()
        drpc.register("/test.Svc/Stall") { _ in
            for await _ in gate.stream {}
            return []
        }
        let pair = YamuxDRPCPair(serving: drpc)
        let client = pair.client
        let stalled = Task {
            try await DRPCClient.unary("/test.Svc/Stall", request: [1], over: YamuxTransportAdapter(stream: try await client.open()))
        }
        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<49 {
                let stream = try await client.open()
                group.addTask {
                    try await DRPCClient.unary(Self.method, request: Self.request, over: YamuxTransportAdapter(stream: stream))
                }
            }
            var replies = 0
            for try await reply in group {
                #expect(reply == Array(Self.request.dropFirst(2)))
                replies += 1
            }
            #expect(replies == 49)
        }
        gate.continuation.finish()
        _ = try await stalled.value
        await pair.shutdown()
    }
}

/// A yamux client and server connected by in-memory pumps, the server serving dRPC on
/// every stream it accepts.
struct YamuxDRPCPair {
    let client: YamuxSession
    let server: YamuxSession
    private let tasks: [Task<Void, Never>]

    init(serving rpcServer: DRPCServer) {
        let (toServer, toServerSink) = AsyncStream<[UInt8]>.makeStream()
        let (toClient, toClientSink) = AsyncStream<[UInt8]>.makeStream()
        let client = YamuxSession(role: .client, transport: SinkTransport(sink: toServerSink))
        let server = YamuxSession(role: .server, transport: SinkTransport(sink: toClientSink))
        self.client = client
        self.server = server
        tasks = [
            Task {
                for await b in toServer { await server.receive(b) }; await server.transportClosed()
            },
            Task {
                for await b in toClient { await client.receive(b) }; await client.transportClosed()
            },
            Task {
                await withTaskGroup(of: Void.self) { group in
                    while let stream = await server.accept() {
                        group.addTask { await rpcServer.serve(YamuxTransportAdapter(stream: stream)) }
                    }
                }
            },
        ]
    }

    func shutdown() async {
        await client.close()
        await server.close()
        for task in tasks { await task.value }
    }
}

/// A yamux transport that yields into a stream the peer's pump reads.
struct SinkTransport: YamuxTransport {
    let sink: AsyncStream<[UInt8]>.Continuation
    func write(_ bytes: ByteBuffer) { sink.yield(Array(bytes.readableBytesView)) }
    func close() { sink.finish() }
}

/// Records what a serving loop reports, in order.
final class RecordingObserver: DRPCServingObserver {
    private let recorded = Mutex<[String]>([])
    /// Reports of a frame ended with the next begun (its own deadline starts).
    let rearmed = Atomic<Int>(0)

    var events: [String] { recorded.withLock { $0 } }

    func decoded(midFrame: Bool, endedAFrame: Bool) {
        if midFrame && endedAFrame { rearmed.add(1, ordering: .relaxed) }
        recorded.withLock { events in
            let event = midFrame ? "mid" : "between"
            // One entry per change, so that the sequence does not depend on how reads split.
            if events.last != event { events.append(event) }
        }
    }

    func call(inProgress: Bool) {
        recorded.withLock { $0.append(inProgress ? "call" : "idle-call") }
    }
}
