import AgentJSON
import Testing

/// `String(goDecoding:)`: one U+FFFD for each byte outside a well-formed UTF-8 sequence, as
/// Go's `encoding/json` marshals a string (`utf8.DecodeRune` answers `(RuneError, 1)`), where
/// `String(decoding:as:)` makes one per maximal subpart.
struct GoUTF8Tests {
    static func scalars(_ text: String) -> [UInt32] { text.unicodeScalars.map(\.value) }

    /// Bytes and their text, each `*` standing for U+FFFD.
    static let cases: [([UInt8], String)] = [
        ([0x61, 0xE2, 0x82, 0x62, 0xFF, 0xFE, 0x63], "a**b**c"),
        // A multi-byte sequence cut short, in the middle and at the end.
        ([0xE2, 0x82, 0x41], "**A"),
        ([0xF0, 0x9F, 0x98, 0x41], "***A"),
        ([0x41, 0xF0, 0x9F, 0x98], "A***"),
        ([0xE2, 0x82], "**"),
        ([0xC2], "*"),
        ([0xC2, 0x41], "*A"),
        // Lone continuation bytes.
        ([0x80, 0xBF, 0x41], "**A"),
        ([0x98, 0xF0, 0x9F, 0x98, 0x80], "*😀"),
        // Overlong encodings, surrogates, past U+10FFFF, bytes that never occur.
        ([0xC0, 0xAF], "**"),
        ([0xE0, 0x80, 0xAF], "***"),
        ([0xF0, 0x80, 0x80, 0xAF], "****"),
        ([0xED, 0xA0, 0x80], "***"),
        ([0xED, 0xA0, 0x80, 0xED, 0xB0, 0x80], "******"),
        ([0xF4, 0x90, 0x80, 0x80], "****"),
        ([0xFF], "*"),
        ([0xF8, 0x88, 0x80, 0x80, 0x80], "*****"),
        // A bad lead before a good sequence: the good one is kept.
        ([0xE2, 0xE2, 0x82, 0xAC], "*€"),
        ([0xF0, 0x9F, 0xE2, 0x82, 0xAC, 0x0A], "**€\n"),
    ]

    @Test(arguments: cases)
    func eachInvalidByteIsOneReplacement(bytes: [UInt8], expected: String) {
        let want = expected.unicodeScalars.map { $0 == "*" ? 0xFFFD : $0.value }
        #expect(Self.scalars(String(goDecoding: bytes)) == want, "\(bytes)")
        // The same through a collection without contiguous storage.
        #expect(Self.scalars(String(goDecoding: bytes.lazy.map { $0 })) == want, "\(bytes)")
    }

    @Test func validUTF8IsUnchanged() {
        let text = "plain, \u{7F}\u{80}\u{7FF}\u{800}\u{D7FF}\u{E000}\u{FFFD}\u{FFFF}\u{10000}\u{10FFFF} é€😀\n"
        #expect(String(goDecoding: Array(text.utf8)) == text)
        #expect(Array(String(goDecoding: Array(text.utf8)).utf8) == Array(text.utf8))
        #expect(String(goDecoding: [UInt8]()) == "")
        // Slices, whole and cut inside U+0080.
        let bytes = Array(text.utf8)
        #expect(String(goDecoding: bytes[3..<10]) == "in, \u{7F}\u{80}")
        #expect(Self.scalars(String(goDecoding: bytes[3..<9])) == Self.scalars("in, \u{7F}\u{FFFD}"))
    }

    /// Against a model built on the standard library's parser: a maximal subpart of n bytes
    /// is n replacements (its first byte is not a whole sequence, the rest are continuation
    /// bytes, each invalid alone), and both resume after it.
    @Test func randomBytesMatchThePerByteModel() {
        func model(_ bytes: [UInt8]) -> [UInt32] {
            var out: [UInt32] = []
            var parser = Unicode.UTF8.ForwardParser()
            var iterator = bytes.makeIterator()
            loop: while true {
                switch parser.parseScalar(from: &iterator) {
                case .valid(let encoded): out.append(Unicode.UTF8.decode(encoded).value)
                case .error(length: let length): out += Array(repeating: 0xFFFD, count: length)
                case .emptyInput: break loop
                }
            }
            return out
        }
        // Bytes that make sequences, cut ones and bad ones likely.
        let alphabet: [UInt8] = [0x41, 0x0A, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        for _ in 0..<5000 {
            let bytes = (0..<Int(next() % 12)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }
            #expect(Self.scalars(String(goDecoding: bytes)) == model(bytes), "\(bytes)")
        }
    }

    /// Request strings are read the same way (Go's decoder unquotes with `utf8.DecodeRune`).
    @Test func parsedJSONStringsReplaceEachInvalidByte() throws {
        let value = try JSONValue.parseWhole([0x22, 0x61, 0xE2, 0x82, 0x62, 0xF0, 0x9F, 0x98, 0x22])
        #expect(value.stringValue.map(Self.scalars) == Self.scalars("a\u{FFFD}\u{FFFD}b\u{FFFD}\u{FFFD}\u{FFFD}"))
        let escaped = try JSONValue.parseFirst([0x22, 0xE2, 0x82, 0x5C, 0x6E, 0xC0, 0x22])
        #expect(escaped.stringValue.map(Self.scalars) == Self.scalars("\u{FFFD}\u{FFFD}\n\u{FFFD}"))
    }
}
