extension JSONValue {
    /// Where the first JSON value of a stream ends in `bytes` (the index after it), or nil
    /// while it is incomplete, for protocols that send JSON values back to back as Go's
    /// `json.Decoder` reads them. An object or array ends at its matching bracket, a string at its
    /// closing quote, anything else at the first blank or structural byte after it (or at
    /// once, for a byte no JSON value starts with, so the error is answered without waiting).
    public static func endOfFirstValue(in bytes: some Collection<UInt8>) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        var started = false
        var scalar = false
        for (offset, byte) in bytes.enumerated() {
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
