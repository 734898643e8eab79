/// Writes a ``JSONValue`` as compact JSON: members in their order, numbers as parsed, strings
/// escaped as JSON requires (control characters, quote, backslash; the rest is UTF-8 as is).
public enum JSONWriter {
    public static func write(_ value: JSONValue, into bytes: inout [UInt8]) {
        switch value {
        case .null: bytes.append(contentsOf: "null".utf8)
        case .bool(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let text): bytes.append(contentsOf: text.utf8)
        case .string(let text): writeString(text, into: &bytes)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(item, into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(member.0, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                write(member.1, into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ text: String, into bytes: inout [UInt8]) {
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                bytes.append(contentsOf: Array("\\u00".utf8))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xf)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// The value as compact JSON text.
    public var jsonText: String {
        var bytes: [UInt8] = []
        JSONWriter.write(self, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension JSONValue {
    /// The value as compact JSON (``JSONWriter``).
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.write(self, into: &bytes)
        return bytes
    }
}
