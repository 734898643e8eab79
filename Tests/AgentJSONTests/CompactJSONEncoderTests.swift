import AgentJSON
import Foundation
import Testing

/// The compact encoder writes the bytes Foundation's `JSONEncoder` writes with
/// `[.sortedKeys, .withoutEscapingSlashes]` (what the API answered with before).
struct CompactJSONEncoderTests {
    private func foundation(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    private func compact(_ value: some Encodable) throws -> String {
        String(decoding: try CompactJSONEncoder().encode(value), as: UTF8.self)
    }

    private func expectSame(_ value: some Encodable, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try compact(value) == (try foundation(value)), sourceLocation: sourceLocation)
    }

    struct Flat: Encodable {
        var id = "5abf8495-777c-408e-80dc-64929f78a165"
        var started = true
        var exitCode: Int? = nil
        var count: Int64 = -9_223_372_036_854_775_808
        var big: UInt64 = .max
        var small: Int8 = -7
        var tags = ["b", "a/c"]
        enum CodingKeys: String, CodingKey {
            case id, started, exitCode = "exit_code", count, big, small, tags
        }
    }

    struct Nested: Encodable {
        var processes: [Flat] = [Flat(), Flat(id: "x", started: false, exitCode: 3)]
        var byName: [String: Int] = ["zeta": 1, "alpha": 2, "Beta": 3, "_u": 4, "a10": 5, "a2": 6, "é": 7]
        var byNumber: [Int: String] = [10: "ten", 2: "two"]
        var optionals: [String?] = ["a", nil]
        var empty: [String] = []
        var emptyMap: [String: String] = [:]
        var matrix: [[UInt8]] = [[1, 2], [], [255]]
        var flags: Set<Bool> = [true]
    }

    enum Shape: Encodable {
        case circle(radius: Int)
        case label(String, Int)
        case none
    }

    class Base: Encodable {
        var base = "b"
        enum CodingKeys: String, CodingKey { case base }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(base, forKey: .base)
        }
    }

    final class Derived: Base {
        var own = 1
        enum Keys: String, CodingKey { case own, parent }
        override func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(own, forKey: .own)
            try super.encode(to: container.superEncoder(forKey: .parent))
            try super.encode(to: container.superEncoder())
        }
    }

    struct Hand: Encodable {
        func encode(to encoder: any Encoder) throws {
            var keyed = encoder.container(keyedBy: JSONKey.self)
            try keyed.encode("first", forKey: JSONKey("k"))
            try keyed.encode("second", forKey: JSONKey("k"))  // the last of a duplicate key wins
            var nested = keyed.nestedContainer(keyedBy: JSONKey.self, forKey: JSONKey("n"))
            try nested.encodeNil(forKey: JSONKey("null"))
            var list = keyed.nestedUnkeyedContainer(forKey: JSONKey("l"))
            try list.encode(1.5)
            try list.encode(Float(0.1))
            var inner = list.nestedContainer(keyedBy: JSONKey.self)
            try inner.encode(true, forKey: JSONKey("t"))
            var again = encoder.container(keyedBy: JSONKey.self)  // continues the first container
            try again.encode(2, forKey: JSONKey("after"))
        }
    }

    struct JSONKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Keys whose byte order differs from their normalized order, and a nested container
    /// asked for twice under one key.
    struct Unusual: Encodable {
        func encode(to encoder: any Encoder) throws {
            var keyed = encoder.container(keyedBy: JSONKey.self)
            try keyed.encode(1, forKey: JSONKey("f"))
            try keyed.encode(2, forKey: JSONKey("e\u{301}x"))  // NFD: sorts before "f" by bytes
            try keyed.encode(3, forKey: JSONKey("é"))
            var first = keyed.nestedContainer(keyedBy: JSONKey.self, forKey: JSONKey("n"))
            try first.encode(1, forKey: JSONKey("a"))
            var second = keyed.nestedContainer(keyedBy: JSONKey.self, forKey: JSONKey("n"))
            try second.encode(2, forKey: JSONKey("b"))
        }
    }

    /// Arrays nested `depth` deep.
    struct Deep: Encodable {
        let depth: Int
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            for _ in 1..<depth { container = container.nestedUnkeyedContainer() }
        }
    }

    struct Silent: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    @Test func structsAndCollectionsMatchFoundation() throws {
        try expectSame(Flat())
        try expectSame(Nested())
        try expectSame([Shape.circle(radius: 2), .label("x", 1), .none])
        try expectSame(Derived())
        try expectSame(Hand())
        #expect(throws: EncodingError.self) { try CompactJSONEncoder().encode(Silent()) }
        try expectSame([Silent()])
        try expectSame(["status": "ok"])
        try expectSame([String: String]())
        try expectSame("top level string")
        try expectSame(42)
        try expectSame(Optional<Int>.none)
        try expectSame(Unusual())
        try expectSame(Deep(depth: 500))
        #expect(throws: EncodingError.self) { try CompactJSONEncoder().encode(Deep(depth: 600)) }
        #expect(throws: (any Error).self) { try self.foundation(Deep(depth: 600)) }
    }

    @Test func stringsEscapeAsFoundationDoes() throws {
        var all = ""
        for scalar in 0..<0x80 { all.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        try expectSame(all)
        try expectSame(["k\u{1}\"\\/": "\u{7f}\u{2028}\u{2029}é😀\u{0}"])
        // Pseudo-random strings over a small alphabet full of specials (bounded: 500 cases).
        let alphabet: [Character] = ["a", "\"", "\\", "/", "\n", "\t", "\u{1f}", "é", "😀", " ", "\u{0}", "\r", "\u{8}", "\u{c}"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<500 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            var text = ""
            for step in 0..<Int(state >> 60) {
                text.append(alphabet[Int((state >> UInt64(step * 4)) & 0xF) % alphabet.count])
            }
            try expectSame([text: text])
        }
    }

    @Test func numbersMatchFoundation() throws {
        let doubles: [Double] = [
            0, -0.0, 1, -1, 1.5, 0.1, 0.1 + 0.2, 1e15, 1e16, 1e20, 1e-7, .leastNonzeroMagnitude, 123_456_789.125,
            9_007_199_254_740_991, 9_007_199_254_740_992, -2.5e-3, .greatestFiniteMagnitude,
        ]
        try expectSame(doubles)
        try expectSame(doubles.map { Float($0) }.filter(\.isFinite))
        try expectSame([Int.min, Int.max, 0, -1, 10, 99, 100])
        try expectSame([UInt.max, 0])
        try expectSame([Int16.min, Int16.max])
        #expect(throws: EncodingError.self) { try CompactJSONEncoder().encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try CompactJSONEncoder().encode(["x": Double.infinity]) }
    }
}
