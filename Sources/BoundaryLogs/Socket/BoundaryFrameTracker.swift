/// Follows boundary frame boundaries (a 4-byte header whose low 24 bits are the payload
/// length, then the payload) only to tell whether a frame has begun and not ended. The
/// decoder parses and checks the frames.
struct BoundaryFrameTracker: Sendable {
    private enum Phase: Sendable {
        case header(count: Int, length: Int)
        case payload(remaining: Int)
    }

    private var phase = Phase.header(count: 0, length: 0)

    /// True when a frame has begun and not ended.
    var isMidFrame: Bool {
        if case .header(0, _) = phase { return false }
        return true
    }

    mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes) where Bytes.Index == Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch phase {
            case .header(let count, let length):
                let value = (length << 8) | Int(bytes[index])
                index += 1
                if count == 3 {
                    let payload = value & 0x00FF_FFFF
                    phase = payload == 0 ? .header(count: 0, length: 0) : .payload(remaining: payload)
                } else {
                    phase = .header(count: count + 1, length: value)
                }
            case .payload(let remaining):
                let skip = min(remaining, bytes.endIndex - index)
                index += skip
                phase = skip == remaining ? .header(count: 0, length: 0) : .payload(remaining: remaining - skip)
            }
        }
    }
}
