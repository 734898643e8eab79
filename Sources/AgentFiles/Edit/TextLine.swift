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

    /// The text in three parts: leading spaces and tabs, the body, trailing spaces and
    /// tabs (a blank line is all lead).
    var parts: (lead: ArraySlice<UInt8>, body: ArraySlice<UInt8>, trail: ArraySlice<UInt8>) {
        let leadEnd = indentation.count
        var end = text.count
        while end > leadEnd, text[end - 1] == 0x20 || text[end - 1] == 0x09 { end -= 1 }
        return (text[0..<leadEnd], text[leadEnd..<end], text[end...])
    }

    /// Whether two endings take the same place in a splice: equal, or both a newline
    /// (`\n` and `\r\n`).
    static func sameEndingShape(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a == b || (!a.isEmpty && !b.isEmpty)
    }

    /// Without trailing spaces and tabs (match pass 2).
    var trimmedTrailing: ArraySlice<UInt8> {
        var end = text.count
        while end > 0, text[end - 1] == 0x20 || text[end - 1] == 0x09 { end -= 1 }
        return text[0..<end]
    }

    /// Without any leading or trailing whitespace (match pass 3).
    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0B || byte == 0x0C }

    var trimmedAll: ArraySlice<UInt8> {
        let isSpace = Self.isSpace
        var start = 0
        var end = text.count
        while start < end, isSpace(text[start]) { start += 1 }
        while end > start, isSpace(text[end - 1]) { end -= 1 }
        return text[start..<end]
    }
}

extension Array where Element == TextLine {
    /// The one ending every line but the last shares (the last may have none); nil for
    /// fewer than two lines, an interior line without ending, or a mix.
    var interiorEnding: [UInt8]? {
        guard count >= 2 else { return nil }
        var shared: [UInt8]?
        for (index, line) in enumerated() {
            if line.ending.isEmpty {
                if index == count - 1 { continue }
                return nil
            }
            if let shared, shared != line.ending { return nil }
            shared = line.ending
        }
        return shared
    }

    /// The lines with every ending but the last one's made `ending`.
    func withInteriorEnding(_ ending: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, line) in enumerated() {
            out += line.text
            out += index == count - 1 || line.ending.isEmpty ? line.ending : ending
        }
        return out
    }
}

/// A file's lines as byte ranges of its content (no copies): 24 bytes per line.
struct FileLines {
    struct Span {
        var start: Int
        var textEnd: Int
        /// Past the line's ending.
        var end: Int
    }

    let content: [UInt8]
    let spans: [Span]

    /// Splits as ``TextLine/split(_:)`` does.
    init(_ content: [UInt8]) {
        self.content = content
        var spans: [Span] = []
        var start = 0
        for index in content.indices where content[index] == 0x0A {
            let crlf = index > start && content[index - 1] == 0x0D
            spans.append(Span(start: start, textEnd: crlf ? index - 1 : index, end: index + 1))
            start = index + 1
        }
        if start < content.count { spans.append(Span(start: start, textEnd: content.count, end: content.count)) }
        self.spans = spans
    }

    var count: Int { spans.count }

    func line(_ index: Int) -> TextLine {
        let span = spans[index]
        return TextLine(text: Array(content[span.start..<span.textEnd]), ending: Array(content[span.textEnd..<span.end]))
    }

    /// The text a pass compares: without trailing spaces and tabs, or without any
    /// surrounding whitespace (as ``TextLine/trimmedTrailing`` and ``TextLine/trimmedAll``).
    func key(_ index: Int, _ pass: EditEngine.Pass) -> ArraySlice<UInt8> {
        let span = spans[index]
        var start = span.start
        var end = span.textEnd
        switch pass {
        case .trailingWhitespace:
            while end > start, content[end - 1] == 0x20 || content[end - 1] == 0x09 { end -= 1 }
        case .allWhitespace:
            while start < end, TextLine.isSpace(content[start]) { start += 1 }
            while end > start, TextLine.isSpace(content[end - 1]) { end -= 1 }
        }
        return content[start..<end]
    }

    /// The whole file's indentation unit (only asked when a window has none of its own).
    func indentationUnit() -> Indentation.Unit? {
        Indentation.unit(
            ofIndentations: spans.indices.lazy.filter { !key($0, .allWhitespace).isEmpty }.map { index in
                let span = spans[index]
                return content[span.start..<span.textEnd].prefix { $0 == 0x20 || $0 == 0x09 }
            })
    }
}

/// How a file's lines end: whether any does, and the dominant ending (CRLF when CRLF lines
/// outnumber LF ones), counted in one pass over the bytes.
struct EndingCounts {
    var lf = 0
    var crlf = 0

    init(_ content: [UInt8]) {
        content.withUnsafeBytes { raw in
            for index in raw.indices where raw[index] == 0x0A {
                if index > 0, raw[index - 1] == 0x0D { crlf += 1 } else { lf += 1 }
            }
        }
    }

    var any: Bool { lf + crlf > 0 }
    var dominant: [UInt8] { crlf > lf ? TextLine.crlf : TextLine.lf }
}

/// A line's 64-bit FNV-1a hash, for matching windows of lines.
enum LineHash {
    static func of(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
