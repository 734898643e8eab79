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

    /// Without any leading or trailing white space as Go's `strings.TrimSpace` sees it
    /// (match pass 3, and the pairing of search and replacement lines).
    var trimmedAll: ArraySlice<UInt8> { text[GoSpace.trimmed(text, 0..<text.count)] }
}

/// White space as Go's `unicode.IsSpace` has it, which `strings.TrimSpace` trims: the ASCII
/// `\t \n \v \f \r` and space, and U+0085, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029,
/// U+202F, U+205F and U+3000 (Unicode's White_Space). Bytes are UTF-8, not validated: an
/// edge byte below 0x80 is decided alone, and only one of 0x80 or more makes the scalar at
/// that edge be looked at, so ASCII lines cost what they did. A broken sequence at an edge
/// is not white space (Go decodes it as U+FFFD).
enum GoSpace {
    static func isASCIISpace(_ byte: UInt8) -> Bool { byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) }

    /// `range` of `bytes` without the white space at either end.
    static func trimmed(_ bytes: [UInt8], _ range: Range<Int>) -> Range<Int> {
        var start = range.lowerBound
        var end = range.upperBound
        while start < end {
            let byte = bytes[start]
            if byte < 0x80 {
                guard isASCIISpace(byte) else { break }
                start += 1
            } else {
                let length = spaceLength(bytes, startingAt: start, end: end)
                guard length > 0 else { break }
                start += length
            }
        }
        while end > start {
            let byte = bytes[end - 1]
            if byte < 0x80 {
                guard isASCIISpace(byte) else { break }
                end -= 1
            } else {
                let length = spaceLength(bytes, endingAt: end, start: start)
                guard length > 0 else { break }
                end -= length
            }
        }
        return start..<end
    }

    /// The length of the non-ASCII white-space scalar that begins at `index` (and ends by
    /// `end`), 0 when none does.
    static func spaceLength(_ bytes: [UInt8], startingAt index: Int, end: Int) -> Int {
        guard end - index >= 2 else { return 0 }
        let lead = bytes[index]
        let second = bytes[index + 1]
        if lead == 0xC2 { return second == 0x85 || second == 0xA0 ? 2 : 0 }
        guard end - index >= 3 else { return 0 }
        return isThreeByteSpace(lead, second, bytes[index + 2]) ? 3 : 0
    }

    /// The length of the non-ASCII white-space scalar that ends at `end` (and begins at or
    /// after `start`), 0 when none does. Each of the sequences begins with a lead byte, so
    /// the scalar Go decodes last is the one matched here.
    static func spaceLength(_ bytes: [UInt8], endingAt end: Int, start: Int) -> Int {
        let last = bytes[end - 1]
        if end - start >= 2, bytes[end - 2] == 0xC2, last == 0x85 || last == 0xA0 { return 2 }
        if end - start >= 3, isThreeByteSpace(bytes[end - 3], bytes[end - 2], last) { return 3 }
        return 0
    }

    /// U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 in UTF-8.
    static func isThreeByteSpace(_ first: UInt8, _ second: UInt8, _ third: UInt8) -> Bool {
        switch (first, second) {
        case (0xE1, 0x9A): return third == 0x80
        case (0xE2, 0x80): return (0x80...0x8A).contains(third) || third == 0xA8 || third == 0xA9 || third == 0xAF
        case (0xE2, 0x81): return third == 0x9F
        case (0xE3, 0x80): return third == 0x80
        default: return false
        }
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
            let trimmed = GoSpace.trimmed(content, start..<end)
            start = trimmed.lowerBound
            end = trimmed.upperBound
        }
        return content[start..<end]
    }

    /// The whole file's indentation unit (only asked when a window has none of its own).
    func indentationUnit() -> Indentation.Unit? {
        Indentation.unit(
            ofIndentations: spans.indices.lazy.compactMap { index -> ArraySlice<UInt8>? in
                // Lines with a body (a byte besides spaces and tabs), as ``Indentation/unit(of:)``.
                let text = content[spans[index].start..<spans[index].textEnd]
                let lead = text.prefix { $0 == 0x20 || $0 == 0x09 }
                return lead.count < text.count ? lead : nil
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
