/// Finds where the first JSON value of a stream ends, one piece at a time: for protocols
/// that send JSON values back to back as Go's `json.Decoder` reads them. An object or array
/// ends at its matching bracket, a string at its closing quote, anything else at the first
/// blank or structural byte after it (or at once, for a byte no JSON value starts with, so
/// the error is answered without waiting). Each byte is examined once, however the value
/// arrives (a value split over many reads costs its length, not its length per read).
public struct JSONValueBoundary: Sendable {
    private var depth = 0
    private var inString = false
    private var escaped = false
    private var scalar = false
    /// Whether the value has begun (blanks before it are skipped).
    public private(set) var started = false
    /// Bytes examined so far, blanks before the value included.
    public private(set) var consumed = 0

    public init() {}

    /// Examines `bytes`, the stream's next bytes: the index after the value's end, counted from
    /// the first byte this boundary was given, or nil while it is incomplete (every byte of
    /// `bytes` examined; give the ones after them next).
    public mutating func scan(_ bytes: some Collection<UInt8>) -> Int? {
        for byte in bytes {
            let offset = consumed
            consumed += 1
            if !started {
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth = 1
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                    scalar = true
                default: return offset + 1
                }
                started = true
                continue
            }
            if scalar {
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "{"), UInt8(ascii: "}"),
                    UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: "\""):
                    // The byte after a scalar is not part of it.
                    consumed = offset
                    return offset
                default: continue
                }
            }
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { return offset + 1 }
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return offset + 1 }
            default: break
            }
        }
        return nil
    }
}
