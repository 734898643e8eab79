import AgentCore
import AgentProto
import BoundaryLogs
import NIOCore
import NIOEmbedded

/// A boundary connection's byte stream (4-byte header: tag, 24-bit length; then a protobuf
/// body), split anywhere, through the agent's decoder and connection handler in NIO's
/// `ByteToMessageHandler`. The frames must be exactly those a plain reading of the stream
/// gives, in order, up to the first bad header, after which the connection is closed; the
/// forwarder's memory queue stays within its bound; sequence-number checks add up.
public func fuzzBoundaryFrames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    if input.byte() % 8 == 0 {
        sequences(&input)
        return 0
    }
    // Most of the input is the stream; what follows it splits the stream into chunks.
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 300)
    let expected = referenceFrames(stream)

    let channel = EmbeddedChannel()
    let (handler, queued, capacity) = BoundaryLogsFuzzing.connectionHandler(upward: DiscardingUpward())
    let tap = FrameTap()
    do {
        try channel.pipeline.syncOperations.addHandlers([ByteToMessageHandler(BoundaryFrameDecoder()), tap, handler])
        // An EmbeddedChannel is active once "connected".
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    } catch {
        require(false, "pipeline: \(error)")
    }
    for chunk in chunks where channel.isActive {
        _ = try? channel.writeInbound(ByteBuffer(bytes: chunk))
        require(queued() <= capacity, "the forwarder holds \(queued()) batches, over its bound \(capacity)")
    }
    require(tap.frames == expected.frames, "frames differ from a plain reading of the stream: \(tap.frames) against \(expected.frames)")
    if expected.bad { require(!channel.isActive, "a bad header left the connection open") }
    _ = try? channel.finish(acceptAlreadyClosed: true)
    return 0
}

/// The frames a plain reading of `stream` gives, and whether it reached a bad header.
private func referenceFrames(_ stream: [UInt8]) -> (frames: [(tag: UInt8, payload: [UInt8])], bad: Bool) {
    var frames: [(tag: UInt8, payload: [UInt8])] = []
    var at = 0
    while stream.count - at >= 4 {
        let tag = stream[at]
        let length = Int(stream[at + 1]) << 16 | Int(stream[at + 2]) << 8 | Int(stream[at + 3])
        guard tag == 1 || tag == 2, length <= BoundaryFrameDecoder.maxPayload else { return (frames, true) }
        guard stream.count - at - 4 >= length else { break }
        frames.append((tag, Array(stream[(at + 4)..<(at + 4 + length)])))
        at += 4 + length
    }
    return (frames, false)
}

/// Records each decoded frame and passes it on.
private final class FrameTap: ChannelInboundHandler {
    typealias InboundIn = BoundaryFrame
    typealias InboundOut = BoundaryFrame
    var frames: [(tag: UInt8, payload: [UInt8])] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .v1(let payload): frames.append((1, Array(payload.readableBytesView)))
        case .v2(let payload): frames.append((2, Array(payload.readableBytesView)))
        }
        context.fireChannelRead(data)
    }
}

private func == (a: [(tag: UInt8, payload: [UInt8])], b: [(tag: UInt8, payload: [UInt8])]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { $0.tag == $1.tag && $0.payload == $1.payload }
}

/// One session's sequence numbers: consecutive ones (wrapping at Int32) find nothing;
/// otherwise no more findings than numbers.
private func sequences(_ input: inout FuzzInput) {
    let start = Int32(truncatingIfNeeded: input.uint(4))
    let count = Int(input.byte())
    let consecutive = (0..<count).map { start &+ Int32(truncatingIfNeeded: $0) }
    let clean = BoundaryLogsFuzzing.sequenceFindings(session: "s", numbers: consecutive)
    require(clean.missing == 0 && clean.repeated == 0, "consecutive numbers reported a gap or a repeat")
    var numbers: [Int32] = []
    while input.remaining >= 4, numbers.count < 256 { numbers.append(Int32(truncatingIfNeeded: input.uint(4))) }
    let found = BoundaryLogsFuzzing.sequenceFindings(session: "s", numbers: numbers)
    require(found.repeated <= numbers.count, "more repeats than numbers")
    require(found.missing <= UInt64(numbers.count) * UInt64(UInt32.max), "a gap larger than the numbers span")
}
