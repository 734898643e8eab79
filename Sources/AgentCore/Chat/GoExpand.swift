/// Go's `os.Expand`: `$NAME` (letters, digits, `_`), `${anything}`, and the shell's
/// one-character specials (`$1`, `$?`, `${#}`); a name `lookup` does not know expands to
/// nothing. `$` before anything else is kept, and bad braces (`${}`, an unclosed `${`) are
/// dropped, as Go does. `.mcp.json` `env` values are expanded this way.
public func goExpand(_ text: String, _ lookup: (String) -> String?) -> String {
    let bytes = Array(text.utf8)
    guard bytes.contains(UInt8(ascii: "$")) else { return text }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var start = 0
    var j = 0
    while j < bytes.count {
        if bytes[j] == UInt8(ascii: "$"), j + 1 < bytes.count {
            out += bytes[start..<j]
            let (name, width) = shellName(bytes[(j + 1)...])
            if name == nil, width > 0 {
                // Bad syntax: the characters are eaten.
            } else if let name, !name.isEmpty {
                out += Array((lookup(String(decoding: name, as: UTF8.self)) ?? "").utf8)
            } else {
                out.append(bytes[j])
            }
            j += width
            start = j + 1
        }
        j += 1
    }
    out += bytes[min(start, bytes.count)...]
    return String(decoding: out, as: UTF8.self)
}

/// The name after a `$` and how many bytes it takes; (nil, w > 0) is bad syntax to drop.
private func shellName(_ s: ArraySlice<UInt8>) -> (ArraySlice<UInt8>?, Int) {
    let first = s.startIndex
    if s[first] == UInt8(ascii: "{") {
        if s.count > 2, isShellSpecial(s[first + 1]), s[first + 2] == UInt8(ascii: "}") {
            return (s[(first + 1)...(first + 1)], 3)
        }
        var i = first + 1
        while i < s.endIndex {
            if s[i] == UInt8(ascii: "}") {
                if i == first + 1 { return (nil, 2) }
                return (s[(first + 1)..<i], i - first + 1)
            }
            i += 1
        }
        return (nil, 1)
    }
    if isShellSpecial(s[first]) { return (s[first...first], 1) }
    var i = first
    while i < s.endIndex, isAlphaNumeric(s[i]) { i += 1 }
    return (s[first..<i], i - first)
}

private func isShellSpecial(_ c: UInt8) -> Bool {
    switch c {
    case UInt8(ascii: "*"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "@"), UInt8(ascii: "!"),
        UInt8(ascii: "?"), UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        true
    default:
        false
    }
}

private func isAlphaNumeric(_ c: UInt8) -> Bool {
    c == UInt8(ascii: "_") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c)
        || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(c) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(c)
}
