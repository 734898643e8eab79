import FrameBytes
/// A yamux frame: its header and, for Data frames, the payload.
public struct YamuxFrame: Equatable, Sendable {
    public var header: YamuxHeader
    public var payload: [UInt8]

    public init(header: YamuxHeader, payload: [UInt8] = []) {
        self.header = header
        self.payload = payload
    }

    /// Header then payload, as one buffer.
    public var encoded: [UInt8] {
        var out = header.encoded
        out.append(contentsOf: payload)
        return out
    }
}

/// Incremental yamux decoder over any byte stream (the WebSocket is treated as one: a
/// header and its payload may arrive in separate messages, or split anywhere).
///
/// Memory is bounded: one header plus at most `maxPayload` bytes (a stream's window; a
/// peer that sends more has violated flow control, which is session-fatal).
public struct YamuxFrameDecoder: Sendable {
    public let maxPayload: UInt32
    private var bytes = FrameBytes()

    public init(maxPayload: UInt32 = YamuxHeader.initialWindow) {
        self.maxPayload = maxPayload
    }

    public mutating func feed(_ received: some Sequence<UInt8>) { bytes.append(received) }

    /// The common case, without generic dispatch.
    public mutating func feed(_ received: [UInt8]) { bytes.append(received) }

    /// The next complete frame, or nil until more bytes arrive.
    public mutating func next() throws(YamuxError) -> YamuxFrame? {
        guard bytes.count >= YamuxHeader.size else { return nil }
        let start = bytes.start
        let header = try YamuxHeader(decoding: bytes.storage, at: start)
        var payloadLength = 0
        if header.type == .data {
            guard header.length <= maxPayload else { throw .payloadTooLarge(header.length) }
            payloadLength = Int(header.length)
        }
        let end = start + YamuxHeader.size + payloadLength
        guard bytes.storage.count >= end else { return nil }
        let payload = bytes.take(from: start + YamuxHeader.size, to: end)
        return YamuxFrame(header: header, payload: payload)
    }
}
