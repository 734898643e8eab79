import Testing
@testable import LineRegex
import AgentTestSupport

@Suite(.ownThreads) struct FuzzTests {
    static let tokens: [String] = [
        "a", "b", "é", "☺", "(", ")", "(?:", "(?i)", "(?s)", "(?m)", "(?P<n>", "*", "+", "?", "*?", "|", "[", "]",
        "[^", "-", "^", "$", ".", "\\", "\\b", "\\B", "\\d", "\\W", "\\pL", "\\p{Lu}", "\\x{41}", "\\Q", "\\E",
        "{2}", "{1,3}", "{0,}", "{1000}", "[[:alpha:]]", "\\1", "(?=", "k", "K", "\u{212A}", "\n",
    ]

    @Test func randomBytes() {
        var rng = SeededGenerator(seed: 42)
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<48, using: &rng)
            let data = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            LineRegexFuzzing.fuzz(data)
        }
    }

    @Test func randomTokenPatterns() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<2000 {
            var pattern = ""
            for _ in 0..<Int.random(in: 0..<10, using: &rng) {
                pattern += Self.tokens.randomElement(using: &rng)!
            }
            var text = ""
            for _ in 0..<Int.random(in: 0..<16, using: &rng) {
                text += ["a", "b", "é", "K", "k", "\n", " ", "1", "☺"].randomElement(using: &rng)!
            }
            var data = Array(pattern.utf8)
            data.append(0)
            data.append(contentsOf: text.utf8)
            if Bool.random(using: &rng) { data.append(0xFF) }
            LineRegexFuzzing.fuzz(data)
        }
    }
}
