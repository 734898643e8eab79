import AgentCore

/// A YAML value as the front matter reader sees it: a string, or something else (null, a
/// number, a boolean, a collection), which is all a field check needs to know.
enum YAMLScalar: Equatable {
    case string(String)
    case other(String)
}

/// The YAML subset of skill front matter (see ``SkillFrontMatter``): a top-level block map
/// read line by line. Bounded by its input (at most 64 KiB: the per-file cap) and linear in it.
enum FrontMatterYAML {
    struct Failure: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// The map's keys and values; an empty block is an empty map (null in YAML).
    static func parseMap(_ rawLines: [String]) throws(Failure) -> [String: YAMLScalar] {
        let lines = rawLines.map { $0.utf8.last == UInt8(ascii: "\r") ? String($0.dropLast()) : $0 }
        var map: [String: YAMLScalar] = [:]
        var definedAt: [String: Int] = [:]
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let number = index + 2  // the document's first line is the opening `---`
            if isBlankOrComment(line) {
                index += 1
                continue
            }
            guard indentation(line) == 0 else { throw Failure("yaml: line \(number): did not find expected key") }
            if line == "-" || line.hasPrefix("- ") { throw Failure("yaml: unmarshal errors:\n  line \(number): cannot unmarshal !!seq into map[string]interface {}") }
            guard let (key, rest) = splitKey(line) else {
                throw Failure("yaml: unmarshal errors:\n  line \(number): cannot unmarshal !!str `\(line.prefix(20))` into map[string]interface {}")
            }
            var end = index + 1
            while end < lines.count, lines[end].isEmpty || lines[end].utf8.first == UInt8(ascii: " ") || lines[end].utf8.first == UInt8(ascii: "#") {
                end += 1
            }
            // Trailing blank and comment lines belong to no value.
            var contentEnd = end
            while contentEnd > index + 1, isBlankOrComment(lines[contentEnd - 1]) && indentation(lines[contentEnd - 1]) == 0 { contentEnd -= 1 }
            let continuation = Array(lines[(index + 1)..<contentEnd])
            if let first = definedAt[key] {
                throw Failure("yaml: unmarshal errors:\n  line \(number): mapping key \"\(key)\" already defined at line \(first)")
            }
            definedAt[key] = number
            map[key] = try value(rest, continuation, line: number)
            index = end
        }
        return map
    }

    /// Read on UTF-8 bytes, as every line of the front matter passes here more than once.
    static func isBlankOrComment(_ line: String) -> Bool {
        for byte in line.utf8 where byte != UInt8(ascii: " ") && byte != UInt8(ascii: "\t") { return byte == UInt8(ascii: "#") }
        return true
    }

    static func indentation(_ line: String) -> Int { line.utf8.prefix { $0 == UInt8(ascii: " ") }.count }

    /// `key: rest` or `key:` (a quoted key allowed); nil when the line is no map entry.
    static func splitKey(_ line: String) -> (String, Substring)? {
        if let quote = line.first, quote == "\"" || quote == "'" {
            guard let close = line.dropFirst().firstIndex(of: quote) else { return nil }
            let after = line[line.index(after: close)...]
            guard after.hasPrefix(":") else { return nil }
            return (String(line[line.index(after: line.startIndex)..<close]), after.dropFirst())
        }
        var search = line[...]
        while let colon = search.firstIndex(of: ":") {
            let after = line.index(after: colon)
            if after == line.endIndex || line[after] == " " || line[after] == "\t" {
                return (String(line[..<colon]).trimmingSpaces(), line[after...])
            }
            search = line[after...]
        }
        return nil
    }

    static func value(_ inline: Substring, _ continuation: [String], line: Int) throws(Failure) -> YAMLScalar {
        var text = inline.drop { $0 == " " || $0 == "\t" }
        // An anchor names the value; the value follows it.
        if text.hasPrefix("&") {
            text = text.drop { $0 != " " }.drop { $0 == " " }
        }
        if text.hasPrefix("!!str ") {
            let rest = text.dropFirst(6)
            return .string(try scalarText(rest, continuation, line: line).text)
        }
        if text.hasPrefix("!") || text.hasPrefix("*") { return .other("tagged or alias") }
        if text.isEmpty || text.hasPrefix("#") {
            let content = continuation.filter { !isBlankOrComment($0) }
            guard let first = content.first else { return .other("null") }
            let trimmed = first.drop { $0 == " " }
            if trimmed == "-" || trimmed.hasPrefix("- ") || splitKey(String(trimmed)) != nil { return .other("collection") }
        }
        if text.hasPrefix("[") || text.hasPrefix("{") { return .other("flow collection") }
        let resolved = try scalarText(text, continuation, line: line)
        return resolved.isPlain ? resolve(resolved.text) : .string(resolved.text)
    }

    private struct ScalarText {
        var text: String
        var isPlain: Bool
    }

    private static func scalarText(_ text: Substring, _ continuation: [String], line: Int) throws(Failure) -> ScalarText {
        if text.hasPrefix("|") || text.hasPrefix(">") {
            return ScalarText(text: block(String(text), continuation), isPlain: false)
        }
        if text.hasPrefix("\"") || text.hasPrefix("'") {
            return ScalarText(text: try quoted(text, continuation, line: line), isPlain: false)
        }
        // A plain scalar: this line and the more-indented ones after it, folded.
        var parts: [String] = []
        parts.reserveCapacity(continuation.count + 1)
        for (offset, raw) in ([text] + continuation.map { $0[...].dropLeadingBlanks }).enumerated() {
            let (part, mapping) = plainLine(raw)
            if mapping { throw Failure("yaml: line \(line + offset): mapping values are not allowed in this context") }
            parts.append(String(part))
        }
        return ScalarText(text: fold(parts), isPlain: true)
    }

    /// A plain scalar's line before ` #` and trailing blanks, and whether what is left holds
    /// `: ` or ends in `:`; one pass over its bytes.
    private static func plainLine(_ text: Substring) -> (Substring, mapping: Bool) {
        var previous = UInt8(ascii: " ")
        var offset = 0
        var mapping = false
        var kept = text
        for byte in text.utf8 {
            if byte == UInt8(ascii: "#"), previous == UInt8(ascii: " ") || previous == UInt8(ascii: "\t") {
                kept = text[..<text.utf8.index(text.startIndex, offsetBy: offset)]
                break
            }
            if previous == UInt8(ascii: ":"), byte == UInt8(ascii: " ") { mapping = true }
            previous = byte
            offset += 1
        }
        kept = kept.dropLastSpaces
        return (kept, mapping || kept.utf8.last == UInt8(ascii: ":"))
    }

    /// Line folding: lines joined by one space, an empty line becomes a line break.
    private static func fold(_ parts: [String]) -> String {
        var out = ""
        var pendingBreaks = 0
        var started = false
        for part in parts {
            if part.isEmpty {
                if started { pendingBreaks += 1 }
                continue
            }
            if started { out += pendingBreaks > 0 ? String(repeating: "\n", count: pendingBreaks) : " " }
            out += part
            started = true
            pendingBreaks = 0
        }
        return out
    }

    /// `|` (literal) and `>` (folded) with the chomping indicators `-`, `+` and an optional
    /// indentation digit.
    private static func block(_ header: String, _ continuation: [String]) -> String {
        let literal = header.hasPrefix("|")
        let indicators = plainLine(header.dropFirst()[...]).0
        let chomp: Character? = indicators.first { $0 == "-" || $0 == "+" }
        let explicit = indicators.first { $0.isNumber }.flatMap { Int(String($0)) }
        let indent = explicit ?? continuation.first { !$0.trimmingSpaces().isEmpty }.map(indentation) ?? 0
        var lines = continuation.map { line -> String in
            // The indentation is spaces: dropped as bytes (counting characters cost a pass per line).
            if indentation(line) >= indent { return String(Substring(line.utf8.dropFirst(indent))) }
            return line.count >= indent ? String(line.dropFirst(indent)) : ""
        }
        var trailing = 0
        while let last = lines.last, last.trimmingSpaces().isEmpty {
            lines.removeLast()
            trailing += 1
        }
        var body: String
        if literal {
            body = lines.joined(separator: "\n")
        } else {
            body = ""
            var previousWasText = false
            for line in lines {
                if line.isEmpty {
                    body += "\n"
                    previousWasText = false
                } else if line.hasPrefix(" ") || line.hasPrefix("\t") {
                    if !body.isEmpty && !body.hasSuffix("\n") { body += "\n" }
                    body += line + "\n"
                    previousWasText = false
                } else {
                    if previousWasText { body += " " }
                    body += line
                    previousWasText = true
                }
            }
            if body.hasSuffix("\n") { body.removeLast() }
        }
        if lines.isEmpty { return chomp == "+" ? String(repeating: "\n", count: trailing) : "" }
        switch chomp {
        case "-": return body
        case "+": return body + "\n" + String(repeating: "\n", count: trailing)
        default: return body + "\n"
        }
    }

    /// A single- or double-quoted scalar, over as many lines as it takes.
    private static func quoted(_ text: Substring, _ continuation: [String], line: Int) throws(Failure) -> String {
        let quote = text.first!
        let source = ([String(text.dropFirst())] + continuation.map { String($0.drop { $0 == " " || $0 == "\t" }) })
        var out = ""
        var lineIndex = 0
        var pendingBreaks = -1  // -1: nothing to fold yet on this line
        while lineIndex < source.count {
            let scalars = Array(source[lineIndex].unicodeScalars)
            if pendingBreaks >= 0 {
                if scalars.isEmpty {
                    pendingBreaks += 1
                    lineIndex += 1
                    continue
                }
                out += pendingBreaks > 0 ? String(repeating: "\n", count: pendingBreaks) : " "
            }
            var i = 0
            var escapedBreak = false
            while i < scalars.count {
                let c = scalars[i]
                if Character(c) == quote {
                    if quote == "'", i + 1 < scalars.count, scalars[i + 1] == "'" {
                        out.unicodeScalars.append("'")
                        i += 2
                        continue
                    }
                    return out
                }
                if quote == "\"", c == "\\" {
                    guard i + 1 < scalars.count else {
                        escapedBreak = true
                        break
                    }
                    let e = scalars[i + 1]
                    i += 2
                    switch e {
                    case "n": out += "\n"
                    case "t", "\t": out += "\t"
                    case "r": out += "\r"
                    case "0": out += "\0"
                    case "\\", "\"", "/", " ": out.unicodeScalars.append(e)
                    case "a": out += "\u{07}"
                    case "b": out += "\u{08}"
                    case "e": out += "\u{1B}"
                    case "f": out += "\u{0C}"
                    case "v": out += "\u{0B}"
                    case "N": out += "\u{85}"
                    case "_": out += "\u{A0}"
                    case "x", "u", "U":
                        let width = e == "x" ? 2 : e == "u" ? 4 : 8
                        guard i + width <= scalars.count,
                            let value = UInt32(String(String.UnicodeScalarView(scalars[i..<(i + width)])), radix: 16),
                            let scalar = Unicode.Scalar(value)
                        else { throw Failure("yaml: line \(line + lineIndex): found unknown escape character while parsing a quoted scalar") }
                        out.unicodeScalars.append(scalar)
                        i += width
                    default:
                        throw Failure("yaml: line \(line + lineIndex): found unknown escape character while parsing a quoted scalar")
                    }
                    continue
                }
                out.unicodeScalars.append(c)
                i += 1
            }
            if !escapedBreak {
                while let last = out.unicodeScalars.last, last == " " || last == "\t" { out.unicodeScalars.removeLast() }
            }
            pendingBreaks = escapedBreak ? -1 : 0
            if escapedBreak { /* joined without a space */  }
            lineIndex += 1
        }
        throw Failure("yaml: line \(line): found unexpected end of stream")
    }

    /// YAML 1.2 core-schema resolution of a plain scalar, as yaml.v3 decodes into `any`:
    /// null, booleans, integers and floats are not strings (timestamps stay strings).
    static func resolve(_ text: String) -> YAMLScalar {
        if ["", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE"].contains(text) {
            return .other(text)
        }
        if [".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"].contains(text) {
            return .other(text)
        }
        return isInteger(text) || isFloat(text) ? .other(text) : .string(text)
    }

    private static func isInteger(_ text: String) -> Bool {
        var body = Substring(text)
        if body.hasPrefix("-") || body.hasPrefix("+") { body = body.dropFirst() }
        let digits: (Character) -> Bool
        if body.hasPrefix("0x") || body.hasPrefix("0X") {
            body = body.dropFirst(2)
            digits = { $0.isHexDigit || $0 == "_" }
        } else if body.hasPrefix("0o") || body.hasPrefix("0O") {
            body = body.dropFirst(2)
            digits = { ("0"..."7").contains($0) || $0 == "_" }
        } else if body.hasPrefix("0b") || body.hasPrefix("0B") {
            body = body.dropFirst(2)
            digits = { $0 == "0" || $0 == "1" || $0 == "_" }
        } else {
            digits = { $0.isASCII && $0.isNumber || $0 == "_" }
        }
        return !body.isEmpty && body.first != "_" && body.allSatisfy(digits)
    }

    /// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
    private static func isFloat(_ text: String) -> Bool {
        var s = Substring(text)
        func digits() -> Int {
            let run = s.prefix { $0.isASCII && $0.isNumber }
            s = s.dropFirst(run.count)
            return run.count
        }
        if s.hasPrefix("-") || s.hasPrefix("+") { s = s.dropFirst() }
        if s.hasPrefix(".") {
            s = s.dropFirst()
            guard digits() > 0 else { return false }
        } else {
            guard digits() > 0 else { return false }
            if s.hasPrefix(".") {
                s = s.dropFirst()
                _ = digits()
            }
        }
        if s.hasPrefix("e") || s.hasPrefix("E") {
            s = s.dropFirst()
            if s.hasPrefix("-") || s.hasPrefix("+") { s = s.dropFirst() }
            guard digits() > 0 else { return false }
        }
        return s.isEmpty
    }
}

extension Substring {
    fileprivate var dropLeadingBlanks: Substring {
        self[(utf8.firstIndex { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") } ?? endIndex)...]
    }

    fileprivate var dropLastSpaces: Substring {
        var end = utf8.endIndex
        while end > utf8.startIndex {
            let before = utf8.index(before: end)
            guard utf8[before] == UInt8(ascii: " ") || utf8[before] == UInt8(ascii: "\t") else { break }
            end = before
        }
        return self[..<end]
    }
}
