/// Follows dRPC frame boundaries in a byte stream (a control byte, three varints, then the
/// data), only to tell whether a frame has begun and not ended: a client that sends half a
/// frame and goes silent is then disconnected. Parsing the frames is the dRPC reader's job.
struct FrameTracker: Sendable {
    private enum Phase: Sendable {
        case control
        /// Inside varint `index` (0: stream, 1: message, 2: length); `length` so far.
        case varint(index: Int, shift: UInt64, length: UInt64)
        case data(remaining: UInt64)
    }

    private var phase = Phase.control

    /// True when a frame has begun and not ended.
    var isMidFrame: Bool {
        if case .control = phase { return false }
        return true
    }

    /// Feeds bytes; `onFrame` gets the kind (bits 1–6 of the control byte) of each frame
    /// that begins.
    mutating func feed(_ bytes: some Sequence<UInt8>, onFrame: (UInt8) -> Void = { _ in }) {
        for byte in bytes {
            switch phase {
            case .control:
                onFrame((byte >> 1) & 0x3F)
                phase = .varint(index: 0, shift: 0, length: 0)
            case .varint(let index, let shift, let length):
                let value = index == 2 && shift < 64 ? length | (UInt64(byte & 0x7F) << shift) : length
                if byte & 0x80 != 0 {
                    phase = .varint(index: index, shift: min(shift + 7, 64), length: value)
                } else if index < 2 {
                    phase = .varint(index: index + 1, shift: 0, length: 0)
                } else {
                    phase = value == 0 ? .control : .data(remaining: value)
                }
            case .data(let remaining):
                phase = remaining <= 1 ? .control : .data(remaining: remaining - 1)
            }
        }
    }

    /// Skips ahead in bulk when a whole buffer falls inside a frame's data.
    mutating func feed(count: Int, bytes: some Collection<UInt8>, onFrame: (UInt8) -> Void = { _ in }) {
        if case .data(let remaining) = phase, UInt64(count) < remaining {
            phase = .data(remaining: remaining - UInt64(count))
            return
        }
        feed(bytes, onFrame: onFrame)
    }
}
