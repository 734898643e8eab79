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
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maxPayload: UInt32 = YamuxHeader.initialWindow) {
        self.maxPayload = maxPayload
    }

    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The common case, without generic dispatch (one copy, no per-byte iteration).
    public mutating func feed(_ bytes: [UInt8]) {
        if start == buffer.count {
            if bytes.count >= 4096 {
                // Nothing pending: take the caller's buffer as is.
                buffer = bytes
                start = 0
                return
            }
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, or nil until more bytes arrive.
    public mutating func next() throws(YamuxError) -> YamuxFrame? {
        guard buffer.count - start >= YamuxHeader.size else { return nil }
        let header = try YamuxHeader(decoding: buffer, at: start)
        var payloadLength = 0
        if header.type == .data {
            guard header.length <= maxPayload else { throw .payloadTooLarge(header.length) }
            payloadLength = Int(header.length)
        }
        let end = start + YamuxHeader.size + payloadLength
        guard buffer.count >= end else { return nil }
        let payload = Array(buffer[(start + YamuxHeader.size)..<end])
        start = end
        if start > 65536 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        return YamuxFrame(header: header, payload: payload)
    }
}
