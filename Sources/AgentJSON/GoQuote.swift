import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Go's `%q` for the strings the API quotes: escapes quotes, backslashes and control bytes.
public func goQuote(_ text: String) -> String {
    quoted(text) { scalar in
        scalar.value < 0x20 || scalar.value == 0x7f ? "\\x" + zeroPadded(scalar.value, width: 2, radix: 16) : nil
    }
}

/// A JSON string literal. With `escapingHTML`, also `<`, `>`, `&`, U+2028 and U+2029 as
/// `\u00XX`, as Go's `encoding/json` writes them (the CLI's JSON output matches Go's).
public func jsonQuote(_ text: String, escapingHTML: Bool = false) -> String {
    quoted(text) { scalar in
        // (A `where` after several patterns would guard only the last one.)
        let html = escapingHTML && ["<", ">", "&", "\u{2028}", "\u{2029}"].contains(scalar)
        return html || scalar.value < 0x20 ? "\\u" + zeroPadded(scalar.value, width: 4, radix: 16) : nil
    }
}

/// `text` in double quotes with `"`, `\`, newline, return and tab escaped, and every other
/// scalar `escape` returns text for replaced by it.
private func quoted(_ text: String, escape: (Unicode.Scalar) -> String?) -> String {
    var out = "\""
    out.reserveCapacity(text.utf8.count + 2)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if let escaped = escape(scalar) { out += escaped } else { out.unicodeScalars.append(scalar) }
        }
    }
    return out + "\""
}

/// `value` in `radix`, zero-padded to `width` digits (`String(format: "%04x")` and kin).
public func zeroPadded<T: BinaryInteger>(_ value: T, width: Int, radix: Int = 10, uppercase: Bool = false) -> String {
    let digits = String(value, radix: radix, uppercase: uppercase)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}
