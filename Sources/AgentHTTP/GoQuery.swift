import Hummingbird

/// A request's query as the reference reads it (Go's `url.ParseQuery`, behind
/// `r.URL.Query()`): pairs split on `&`, `+` read as a space and `%XX` escapes decoded in
/// names and values; an empty pair, one holding a `;` or one with a bad escape is skipped;
/// a name given twice answers its first value (`Values.Get`). Hummingbird's own parameters
/// leave `+` as it is, names undecoded and the last of a repeated name in a dictionary.
public struct GoQuery: Sendable {
    /// Every pair kept, in order.
    public private(set) var pairs: [(name: String, value: String)] = []

    public init(_ request: Request) {
        self.init(raw: request.uri.query ?? "")
    }

    public init(raw: String) {
        for pair in raw.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            guard !pair.contains(UInt8(ascii: ";")) else { continue }
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let name = equals.map { pair[..<$0] } ?? pair[...]
            let value = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
            guard let name = Self.unescape(name), let value = Self.unescape(value) else { continue }
            pairs.append((name, value))
        }
    }

    /// The first value given for `name` (nil: not given).
    public func get(_ name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }

    /// The names given, each once, in the order they first appear.
    public var names: [String] {
        var seen = Set<String>()
        return pairs.compactMap { seen.insert($0.name).inserted ? $0.name : nil }
    }

    /// `%XX` decoded and `+` a space; nil when a `%` is not followed by two hex digits.
    static func unescape(_ bytes: Substring.UTF8View.SubSequence) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                let first = bytes.index(after: index)
                guard first < bytes.endIndex, bytes.index(after: first) < bytes.endIndex,
                    let high = hex(bytes[first]), let low = hex(bytes[bytes.index(after: first)])
                else { return nil }
                out.append(high << 4 | low)
                index = bytes.index(first, offsetBy: 2)
                continue
            }
            out.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index = bytes.index(after: index)
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
