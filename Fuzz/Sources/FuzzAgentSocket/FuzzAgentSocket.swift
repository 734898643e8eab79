import AgentCore
import AgentProto
import AgentSocket
import DRPC
import FuzzSupport
import Synchronization

/// The agent socket as a client reaches it: a dRPC byte stream (split anywhere) served by
/// the real `coder.agentsocket.v1` service on a fresh unit graph, the connection hanging up
/// once everything was sent. Serving must end; every byte the agent answers must be
/// well-formed dRPC (messages, errors, close-sends) on streams the client invoked. The
/// frame tracker that tells a half-sent frame must agree with the dRPC decoder.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAgentSocket(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 80)
    checkTracker(chunks)

    let transport = MemoryTransport(chunks)
    let server = AgentSocketService(units: UnitManager(), upward: DiscardingUpward()).makeServer()
    runBlocking {
        // As the socket server does: serving ends when the connection closes, even if a
        // handler still waits. Here the client hangs up once the agent has stopped reading
        // and writing for 50 ms (bounded: the input is finite).
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await server.serve(transport) }
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
func invokedStreams(_ stream: [UInt8]) -> Set<UInt64> {
    var reader = DRPCPacketReader()
    reader.feed(stream)
    var streams: Set<UInt64> = []
    while let packet = try? reader.next() {
        if packet.kind == .invoke { streams.insert(packet.streamID) }
    }
    return streams
}

/// Where the frame decoder reads the stream without error, the tracker must see the same
/// frames begin and know whether one is still open.
func checkTracker(_ chunks: [[UInt8]]) {
    var decoder = DRPCFrameDecoder()
    var kinds: [UInt8] = []
    for chunk in chunks {
        decoder.feed(chunk)
        do {
            while let frame = try decoder.next() { kinds.append(frame.rawKind) }
        } catch {
            return
        }
    }
    let tracked = AgentSocketFuzzing.trackFrames(chunks)
    let open = decoder.bufferedCount > 0
    require(tracked.midFrame == open, "the tracker says mid-frame \(tracked.midFrame), the decoder holds \(decoder.bufferedCount) bytes")
    require(tracked.kinds == kinds + (open ? [tracked.kinds.last ?? 0] : []), "the tracker saw other frames begin")
}

/// A connection whose client sends `chunks`, then nothing more (EOF); what the agent writes
/// is kept.
final class MemoryTransport: DRPCTransport {
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
