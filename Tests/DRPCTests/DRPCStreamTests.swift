import DRPC
import Synchronization
import Testing
import Yamux

/// Streaming calls: server-streaming and bidirectional, errors, close-send, cancel, and the
/// single-writer rule, over an in-memory duplex and over yamux.
@Suite(.timeLimit(.minutes(3)))
struct DRPCStreamTests {
    static let countdown = "/test.Svc/Countdown"
    static let echo = "/test.Svc/Echo"
    static let fails = "/test.Svc/FailsMidway"

    func streamingServer() -> DRPCServer {
        var server = DRPCServer()
        // Server-streaming: one request (a count), that many replies, then CloseSend.
        server.registerStream(Self.countdown) { call in
            guard let request = try await call.receive(), let n = request.first else { return }
            for i in stride(from: Int(n), to: 0, by: -1) { try await call.send([UInt8(i)]) }
        }
        // Bidirectional: every message comes back reversed until the client's CloseSend.
        server.registerStream(Self.echo) { call in
            while let message = try await call.receive() { try await call.send(message.reversed()) }
        }
        server.registerStream(Self.fails) { call in
            try await call.send([1])
            throw DRPCErrorBody(code: 12, message: "Unimplemented")
        }
        return server
    }

    @Test func serverStreamingGoldenBytesAndReplies() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await streamingServer().serve(serverEnd) }
        let (sender, receiverStart) = DRPCClient.stream(Self.countdown, over: client)
        var receiver = receiverStart
        try await sender.send([3])
        try await sender.closeSend()
        var replies: [[UInt8]] = []
        while let reply = try await receiver.receive() { replies.append(reply) }
        #expect(replies == [[3], [2], [1]])
        // The Invoke left together with the first message; then the CloseSend.
        let name = Array(Self.countdown.utf8)
        #expect(
            client.written.withLock { $0 } == [0x03, 0x01, 0x01, UInt8(name.count)] + name
                + [0x05, 0x01, 0x02, 0x01, 0x03] + [0x0D, 0x01, 0x03, 0x00])
        #expect(
            serverEnd.written.withLock { $0 } == [
                0x05, 0x01, 0x01, 0x01, 0x03, 0x05, 0x01, 0x02, 0x01, 0x02,
                0x05, 0x01, 0x03, 0x01, 0x01, 0x0D, 0x01, 0x04, 0x00,
            ])
        await sender.close()
        _ = await serving.value
    }

    @Test func bidirectionalWithConcurrentSenderAndReceiver() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await streamingServer().serve(serverEnd) }
        let (sender, receiverStart) = DRPCClient.stream(Self.echo, over: client)
        let reading = Task {
            var receiver = receiverStart
            var got: [[UInt8]] = []
            while let reply = try await receiver.receive() { got.append(reply) }
            return got
        }
        for i in 0..<20 { try await sender.send([UInt8(i), 0xFF]) }
        try await sender.closeSend()
        #expect(try await reading.value == (0..<20).map { [0xFF, UInt8($0)] })
        await sender.close()
        _ = await serving.value
    }

    @Test func handlerErrorEndsTheStreamWithThatError() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await streamingServer().serve(serverEnd) }
        let (sender, receiverStart) = DRPCClient.stream(Self.fails, over: client)
        var receiver = receiverStart
        try await sender.closeSend()
        #expect(try await receiver.receive() == [1])
        await #expect(throws: DRPCCallError.remote(DRPCErrorBody(code: 12, message: "Unimplemented"))) {
            _ = try await receiver.receive()
        }
        await sender.close()
        _ = await serving.value
    }

    /// One writer, nothing after close: sends after CloseSend fail and write nothing.
    @Test func nothingIsSentAfterCloseSend() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let serving = Task { await streamingServer().serve(serverEnd) }
        let (sender, _) = DRPCClient.stream(Self.echo, over: client)
        try await sender.closeSend()
        let written = client.written.withLock { $0.count }
        await #expect(throws: DRPCCallError.closed) { try await sender.send([1]) }
        await #expect(throws: DRPCCallError.closed) { try await sender.closeSend() }
        #expect(client.written.withLock { $0.count } == written)
        await sender.close()
        _ = await serving.value
    }

    /// Concurrent sends of large messages never interleave their frames: the server sees
    /// each message whole.
    @Test func concurrentLargeSendsStayContiguous() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let seen = Mutex<[[UInt8]]>([])
        var server = DRPCServer()
        server.registerStream(Self.echo) { call in
            while let message = try await call.receive() { seen.withLock { $0.append(message) } }
        }
        let serving = Task { [server] in await server.serve(serverEnd) }
        let (sender, _) = DRPCClient.stream(Self.echo, over: client)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 {
                group.addTask { try await sender.send([UInt8](repeating: UInt8(i), count: 200_000)) }
            }
            try await group.waitForAll()
        }
        try await sender.closeSend()
        await sender.close()
        _ = await serving.value
        let messages = seen.withLock { $0 }
        #expect(messages.count == 8)
        #expect(messages.allSatisfy { $0.count == 200_000 && Set($0).count == 1 })
    }

    /// Cancel closes the transport (no soft cancel, as Coder): the handler's receive fails
    /// and the server finishes.
    @Test func cancelClosesTheTransport() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let handlerSaw = Mutex<String?>(nil)
        var server = DRPCServer()
        server.registerStream(Self.echo) { call in
            do {
                while try await call.receive() != nil {}
                handlerSaw.withLock { $0 = "eof" }
            } catch {
                handlerSaw.withLock { $0 = "\(error)" }
                throw error
            }
        }
        let serving = Task { [server] in await server.serve(serverEnd) }
        let (sender, _) = DRPCClient.stream(Self.echo, over: client)
        try await sender.send([1])
        await sender.cancel()
        _ = await serving.value
        #expect(handlerSaw.withLock { $0 } == "drpc: EOF")
        await #expect(throws: DRPCCallError.closed) { try await sender.send([2]) }
    }

    /// A client's Cancel packet terminates the server side as "context canceled".
    @Test func cancelPacketTerminatesTheHandler() async throws {
        let (client, serverEnd) = MemoryDuplex.pair()
        let handlerSaw = Mutex<DRPCCallError?>(nil)
        var server = DRPCServer()
        server.registerStream(Self.echo) { call in
            do {
                while try await call.receive() != nil {}
            } catch let error as DRPCCallError {
                handlerSaw.withLock { $0 = error }
            }
        }
        let serving = Task { [server] in await server.serve(serverEnd) }
        var out: [UInt8] = []
        DRPCPacket(streamID: 1, messageID: 1, kind: .invoke, data: Array(Self.echo.utf8)).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 2, kind: .message, data: [7]).encode(into: &out)
        DRPCPacket(streamID: 1, messageID: 3, kind: .cancel).encode(into: &out)
        try await client.write(out)
        await client.closeWrite()
        _ = await serving.value
        #expect(handlerSaw.withLock { $0 } == .remoteClosed("context canceled"))
    }

    @Test func streamingOverYamux() async throws {
        let pair = YamuxDRPCPair(serving: streamingServer())
        let (sender, receiverStart) = DRPCClient.stream(Self.countdown, over: YamuxTransportAdapter(stream: try await pair.client.open()))
        var receiver = receiverStart
        try await sender.send([100])
        try await sender.closeSend()
        var count = 0
        while try await receiver.receive() != nil { count += 1 }
        #expect(count == 100)
        await sender.close()
        await pair.shutdown()
    }
}
