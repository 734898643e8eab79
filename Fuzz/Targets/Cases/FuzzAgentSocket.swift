import AgentCore
import AgentProto
import AgentSocket
import DRPC
import Synchronization

/// The agent socket as a client reaches it: a dRPC byte stream (split anywhere) served by
/// the real `coder.agentsocket.v1` service on a fresh unit graph, the connection hanging up
/// once everything was sent. Serving must end; every byte the agent answers must be
/// well-formed dRPC (messages, errors, close-sends) on streams the client invoked. What the
/// decoder tells the connection (mid-frame, calls beginning and ending) must agree with a
/// plain reading of the stream, and calls never overlap.
public func fuzzAgentSocket(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 80)
    checkMidFrame(chunks)

    let transport = MemoryTransport(chunks)
    let observer = CallObserver()
    let server = AgentSocketService(units: UnitManager(), upward: DiscardingUpward()).makeServer()
    runBlocking {
        // As the socket server does: serving ends when the connection closes, even if a
        // handler still waits. Here the client hangs up once the agent has stopped reading
        // and writing for 50 ms (bounded: the input is finite).
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await server.serve(transport, observer: observer) }
            group.addTask {
                while !Task.isCancelled {
                    let before = transport.progress
                    try? await Task.sleep(for: .milliseconds(50))
                    if transport.progress == before { break }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    var reader = DRPCPacketReader()
    reader.feed(transport.written)
    let invoked = invokedStreams(stream)
    do {
        while let packet = try reader.next() {
            require([.message, .error, .closeSend].contains(packet.kind), "the agent sent a \(packet.kind) packet")
            require(invoked.contains(packet.streamID), "an answer on stream \(packet.streamID), which the client never invoked")
        }
    } catch {
        require(false, "the agent's answer is not valid dRPC: \(error)")
    }
    return 0
}

/// The streams the client's bytes invoke (Invoke packets), as far as they decode.
private func invokedStreams(_ stream: [UInt8]) -> Set<UInt64> {
    var reader = DRPCPacketReader()
    reader.feed(stream)
    var streams: Set<UInt64> = []
    while let packet = try? reader.next() {
        if packet.kind == .invoke { streams.insert(packet.streamID) }
    }
    return streams
}

/// Where the frame decoder reads the stream without error, whether it says it is mid-frame
/// after each chunk must be what a plain reading of the bytes so far says.
private func checkMidFrame(_ chunks: [[UInt8]]) {
    var decoder = DRPCFrameDecoder()
    var received: [UInt8] = []
    for chunk in chunks {
        decoder.feed(chunk)
        received += chunk
        do {
            while try decoder.next() != nil {}
        } catch {
            return
        }
        require(decoder.isMidFrame == endsMidFrame(received), "the decoder says mid-frame \(decoder.isMidFrame) after \(received.count) bytes")
    }
}

/// Whether `stream`, read frame by frame (a control byte, three varints, the data), ends
/// inside a frame.
private func endsMidFrame(_ stream: [UInt8]) -> Bool {
    var at = 0
    while at < stream.count {
        at += 1
        var length: UInt64 = 0
        for field in 0..<3 {
            var shift: UInt64 = 0
            while true {
                guard at < stream.count else { return true }
                let byte = stream[at]
                at += 1
                if field == 2 && shift < 64 { length |= UInt64(byte & 0x7F) << shift }
                shift += 7
                if byte & 0x80 == 0 { break }
            }
        }
        guard UInt64(stream.count - at) >= length else { return true }
        at += Int(length)
    }
    return false
}

/// Checks that calls reported by the serving loop never overlap: each begins after the
/// previous one ended.
private final class CallObserver: DRPCServingObserver {
    private let inCall = Mutex(false)

    func decoded(midFrame: Bool, endedAFrame: Bool) {}

    func call(inProgress: Bool) {
        let overlapping = inCall.withLock { current in
            defer { current = inProgress }
            return current == inProgress
        }
        require(!overlapping, inProgress ? "a call began inside another" : "a call ended twice")
    }
}

/// A connection whose client sends `chunks`, then nothing more (EOF); what the agent writes
/// is kept.
private final class MemoryTransport: DRPCTransport {
    private struct State {
        var chunks: [[UInt8]]
        var next = 0
        var written: [UInt8] = []
        /// Reads and writes so far.
        var progress = 0
    }
    private let state: Mutex<State>

    init(_ chunks: [[UInt8]]) {
        state = Mutex(State(chunks: chunks))
    }

    var written: [UInt8] { state.withLock { $0.written } }
    var progress: Int { state.withLock { $0.progress } }

    func read() async throws -> [UInt8]? {
        state.withLock { s in
            s.progress += 1
            guard s.next < s.chunks.count else { return nil }
            s.next += 1
            return s.chunks[s.next - 1]
        }
    }

    func write(_ bytes: [UInt8]) async throws {
        state.withLock { s in
            s.progress += 1
            s.written += bytes
        }
    }

    func closeWrite() async {}
    func close() async {}
}
