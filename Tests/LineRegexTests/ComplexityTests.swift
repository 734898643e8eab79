import Testing
@testable import LineRegex
import AgentTestSupport

@Suite(.ownThreads) struct ComplexityTests {
    static let size = 100_000

    static let pathological: [(pattern: String, text: [UInt8], expected: Bool)] = [
        (#"(a*)*b"#, Array(repeating: UInt8(ascii: "a"), count: size), false),
        (#"(a|a)*b"#, Array(repeating: UInt8(ascii: "a"), count: size), false),
        (#"(x+x+)+y"#, Array(repeating: UInt8(ascii: "x"), count: size), false),
        (#"^(a+)+$"#, Array(repeating: UInt8(ascii: "a"), count: size) + [UInt8(ascii: "!")], false),
        (#"(.*)*z"#, Array(repeating: UInt8(ascii: "q"), count: size), false),
        (#"(a|aa)*c"#, Array(repeating: UInt8(ascii: "a"), count: size), false),
        (#"(?i)(\w+\s?)*$"#, Array(repeating: UInt8(ascii: "w"), count: size) + [UInt8(ascii: "!")], true),
        (#"(x+x+)+y"#, Array(repeating: UInt8(ascii: "x"), count: size) + [UInt8(ascii: "y")], true),
        (#"a{20}b"#, Array(repeating: UInt8(ascii: "a"), count: size), false),
        (#"(?:a?){30}a{30}"#, Array(repeating: UInt8(ascii: "a"), count: 29), false),
    ]

    @Test(arguments: pathological.indices)
    func pathologicalPatternIsLinear(_ index: Int) throws {
        let (pattern, text, expected) = Self.pathological[index]
        let regex = try LineRegex(pattern)
        let (matched, steps) = regex.matchCountingSteps(text)
        #expect(matched == expected)
        #expect(
            steps <= (text.count + 1) * regex.programSize * 5,
            "\(pattern): \(steps) steps for \(text.count) bytes, program \(regex.programSize)")
    }

    @Test func largeCountedRepetitionStaysBounded() throws {
        let regex = try LineRegex("a{1000}b")
        let text = Array(repeating: UInt8(ascii: "a"), count: 3000)
        let (matched, steps) = regex.matchCountingSteps(text)
        #expect(!matched)
        #expect(steps <= (text.count + 1) * regex.programSize * 5)
        #expect(regex.matches(text + [UInt8(ascii: "b")]))
    }

    @Test func literalFastPathIsBounded() throws {
        let regex = try LineRegex("aaaaaaaaab")
        let text = Array(repeating: UInt8(ascii: "a"), count: Self.size)
        let (matched, steps) = regex.matchCountingSteps(text)
        #expect(!matched)
        #expect(steps <= (text.count + 1) * regex.programSize * 5)
    }

    @Test func stepsGrowLinearly() throws {
        let regex = try LineRegex(#"(a|a)*(b|b)*c"#)
        let small = regex.matchCountingSteps(Array(repeating: UInt8(ascii: "a"), count: 10_000)).steps
        let large = regex.matchCountingSteps(Array(repeating: UInt8(ascii: "a"), count: 40_000)).steps
        #expect(large <= small * 4 + 1000)
    }
}
