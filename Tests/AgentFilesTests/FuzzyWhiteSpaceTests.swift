import Testing

@testable import AgentFiles

/// The white space fuzzy edits trim on match pass 3 (and when pairing search and
/// replacement lines): Go's `strings.TrimSpace`, whose set is `unicode.IsSpace`.
struct FuzzyWhiteSpaceTests {
    /// Go's `unicode.IsSpace`: the ASCII `\t \n \v \f \r` and space, U+0085, U+00A0, and the
    /// rest of Unicode's White_Space.
    static let goSpaces: Set<UInt32> = Set<UInt32>([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]).union(UInt32(0x2000)...UInt32(0x200A))

    static func allWhitespaceKey(_ text: [UInt8]) -> [UInt8] {
        Array(FileLines(text + [0x0A]).key(0, .allWhitespace))
    }

    /// Every scalar of the Basic Multilingual Plane (where all of Unicode's white space is),
    /// and a few beyond it, around a body at both ends: trimmed exactly when Go counts it as
    /// space, the same by the file's keys as by a search line's.
    @Test func trimsExactlyGosWhiteSpace() {
        let body = Array("x".utf8)
        var scalars: [UInt32] = Array(UInt32(0)..<UInt32(0xD800))
        scalars += Array(UInt32(0xE000)..<UInt32(0x1_0000))
        scalars += [0x1_0000, 0x1_F600, 0xE_0020, 0x10_FFFF]
        var wrong: [String] = []
        for value in scalars {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let bytes = Array(String(scalar).utf8)
            let text = bytes + bytes + body + bytes + bytes
            let expected = Self.goSpaces.contains(value) ? body : text
            if Array(TextLine(text: text, ending: []).trimmedAll) != expected { wrong.append("U+\(String(value, radix: 16)) (search line)") }
            if value != 0x0A, Self.allWhitespaceKey(text) != expected { wrong.append("U+\(String(value, radix: 16)) (file line)") }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(20))")
    }

    /// Spaces of both kinds mixed at the edges go; those inside the line stay.
    @Test func mixedEdgesAndInteriorSpace() {
        let text = Array("\u{3000} \u{00A0}\ta\u{2009}\u{3000}b\u{0085}\t\u{2028}".utf8)
        let expected = Array("a\u{2009}\u{3000}b".utf8)
        #expect(Array(TextLine(text: text, ending: []).trimmedAll) == expected)
        #expect(Self.allWhitespaceKey(text) == expected)
        let onlySpaces = Array("\u{3000}\u{00A0} \u{2000}".utf8)
        #expect(TextLine(text: onlySpaces, ending: []).trimmedAll.isEmpty)
        #expect(Self.allWhitespaceKey(onlySpaces).isEmpty)
    }

    /// Bytes that are not UTF-8 at an edge are not white space (Go decodes them as U+FFFD),
    /// even when they are part of a white-space sequence.
    @Test(
        arguments: [
            [0xC2], [0xA0], [0x85], [0xC0, 0xA0], [0xE3, 0x80], [0xE1, 0x9A], [0x80, 0x80], [0x9A, 0x80], [0xE2, 0x80, 0xC2],
        ] as [[UInt8]])
    func brokenSequencesAtTheEdgesStay(broken: [UInt8]) {
        let body = Array("x".utf8)
        for text in [broken + body, body + broken] {
            #expect(Array(TextLine(text: text, ending: []).trimmedAll) == text)
            #expect(Self.allWhitespaceKey(text) == text)
        }
    }

    /// Pass 2 trims only trailing spaces and tabs, as the reference's `TrimRight(_, " \t")`.
    @Test func passTwoTrimsSpacesAndTabsOnly() {
        for space in ["\u{00A0}", "\u{3000}", "\u{0085}", "\u{000B}", "\u{000C}"] {
            let text = Array("x \t\(space)".utf8)
            #expect(Array(TextLine(text: text, ending: []).trimmedTrailing) == text)
            #expect(Array(FileLines(text + [0x0A]).key(0, .trailingWhitespace)) == text)
        }
    }
}
