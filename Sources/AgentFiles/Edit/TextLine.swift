/// One line of a text as bytes and its ending (`\n`, `\r\n`, or none at the end).
struct TextLine: Equatable, Sendable {
    var text: [UInt8]
    var ending: [UInt8]

    static let lf: [UInt8] = [0x0A]
    static let crlf: [UInt8] = [0x0D, 0x0A]

    /// Splits bytes into lines; text that ends with a newline has no empty last line.
    static func split(_ bytes: [UInt8]) -> [TextLine] {
        var lines: [TextLine] = []
        var start = 0
        for index in bytes.indices where bytes[index] == 0x0A {
            let crlf = index > start && bytes[index - 1] == 0x0D
            let textEnd = crlf ? index - 1 : index
            lines.append(TextLine(text: Array(bytes[start..<textEnd]), ending: crlf ? crlf2 : lf))
            start = index + 1
        }
        if start < bytes.count { lines.append(TextLine(text: Array(bytes[start...]), ending: [])) }
        return lines
    }

    private static let crlf2: [UInt8] = [0x0D, 0x0A]

    /// Leading spaces and tabs.
    var indentation: ArraySlice<UInt8> { text.prefix { $0 == 0x20 || $0 == 0x09 } }

    /// Without trailing spaces and tabs (match pass 2).
    var trimmedTrailing: ArraySlice<UInt8> {
        var end = text.count
        while end > 0, text[end - 1] == 0x20 || text[end - 1] == 0x09 { end -= 1 }
        return text[0..<end]
    }

    /// Without any leading or trailing whitespace (match pass 3).
    var trimmedAll: ArraySlice<UInt8> {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0B || byte == 0x0C }
        var start = 0
        var end = text.count
        while start < end, isSpace(text[start]) { start += 1 }
        while end > start, isSpace(text[end - 1]) { end -= 1 }
        return text[start..<end]
    }
}

extension Array where Element == TextLine {
    /// The ending most lines use (CRLF when CRLF lines outnumber LF ones).
    var dominantEnding: [UInt8] {
        let crlf = filter { $0.ending == TextLine.crlf }.count
        let lf = filter { $0.ending == TextLine.lf }.count
        return crlf > lf ? TextLine.crlf : TextLine.lf
    }

    /// The one ending every terminated line shares; nil when they mix or none ends.
    var consistentEnding: [UInt8]? {
        let endings = Set(compactMap { $0.ending.isEmpty ? nil : $0.ending })
        return endings.count == 1 ? endings.first : nil
    }

    var bytes: [UInt8] { flatMap { $0.text + $0.ending } }
}
