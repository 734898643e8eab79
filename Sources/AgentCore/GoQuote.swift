import Foundation

/// Go's `%q` for the strings the API quotes: escapes quotes, backslashes and control bytes.
public func goQuote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 || scalar.value == 0x7f {
                out += String(format: "\\x%02x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// A JSON string literal. With `escapingHTML`, also `<`, `>`, `&`, U+2028 and U+2029 as
/// `\u00XX`, as Go's `encoding/json` writes them (the CLI's JSON output matches Go's).
public func jsonQuote(_ text: String, escapingHTML: Bool = false) -> String {
    var out = "\""
    out.reserveCapacity(text.utf8.count + 2)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "<", ">", "&", "\u{2028}", "\u{2029}" where escapingHTML:
            out += String(format: "\\u%04x", scalar.value)
        default:
            if scalar.value < 0x20 {
                out += String(format: "\\u%04x", scalar.value)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
