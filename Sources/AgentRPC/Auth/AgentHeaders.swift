import AgentCore

/// The extra headers every request to coderd carries (`--agent-header`, `--agent-header-command`):
/// parsed as the reference parses them, added after the agent's own, never logged.
public struct AgentHeaders: Sendable {
    /// Name and value in the order given; a name may repeat.
    public var pairs: [(String, String)]

    public init(_ pairs: [(String, String)] = []) {
        self.pairs = pairs
    }

    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Each entry `key=value`, split at the first `=`, neither side trimmed; an entry without
    /// one is the reference's `split header "<entry>" had less than two parts`.
    public static func parse(_ entries: [String]) throws(ParseError) -> AgentHeaders {
        var pairs: [(String, String)] = []
        for entry in entries {
            guard let equals = entry.firstIndex(of: "=") else {
                throw ParseError(description: "split header \(goQuote(entry)) had less than two parts")
            }
            pairs.append((String(entry[..<equals]), String(entry[entry.index(after: equals)...])))
        }
        return AgentHeaders(pairs)
    }

    /// A string array from an environment variable, as the reference's CLI reads one: comma
    /// separated, a field in double quotes may hold commas (`""` is a quote); empty text is none.
    public static func environmentList(_ text: String) -> [String] {
        guard !text.isEmpty else { return [] }
        var fields: [String] = []
        var field = ""
        var quoted = false
        var atFieldStart = true
        var iterator = Array(text).makeIterator()
        var pending: Character? = nil
        while let character = pending ?? iterator.next() {
            pending = nil
            if quoted {
                if character == "\"" {
                    if let next = iterator.next() {
                        if next == "\"" { field.append("\"") } else { quoted = false; pending = next }
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
                continue
            }
            switch character {
            case ",":
                fields.append(field)
                field = ""
                atFieldStart = true
                continue
            case "\"" where atFieldStart:
                quoted = true
            default:
                field.append(character)
            }
            atFieldStart = false
        }
        fields.append(field)
        return fields
    }

    /// Lines of a header command's output as Go's line scanner gives them: split at `\n`, a
    /// trailing `\r` dropped, no empty last line for output ending in a newline.
    public static func lines(_ output: [UInt8]) -> [String] {
        var lines: [String] = []
        var start = 0
        for (index, byte) in output.enumerated() where byte == UInt8(ascii: "\n") {
            lines.append(line(output[start..<index]))
            start = index + 1
        }
        if start < output.count { lines.append(line(output[start...])) }
        return lines
    }

    private static func line(_ bytes: ArraySlice<UInt8>) -> String {
        var bytes = bytes
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
