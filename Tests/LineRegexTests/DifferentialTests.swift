import Testing
@testable import LineRegex
import AgentTestSupport

/// Restricted regex AST for the reference matcher: literals a/b/c, `.`, classes, `* + ?`,
/// alternation, groups and `^`/`$`.
indirect enum RefNode {
    case literal(UInt8)
    case dot
    case charClass(Set<UInt8>, negated: Bool)
    case concat([RefNode])
    case alternate([RefNode])
    case star(RefNode)
    case plus(RefNode)
    case quest(RefNode)
    case begin
    case end

    /// RE2 syntax for this node.
    var pattern: String {
        switch self {
        case .literal(let c): return String(UnicodeScalar(c))
        case .dot: return "."
        case .charClass(let set, let negated):
            return "[" + (negated ? "^" : "") + String(decoding: set.sorted(), as: UTF8.self) + "]"
        case .concat(let parts): return parts.map { $0.groupedForConcat }.joined()
        case .alternate(let parts): return parts.map(\.pattern).joined(separator: "|")
        case .star(let x): return x.groupedForRepeat + "*"
        case .plus(let x): return x.groupedForRepeat + "+"
        case .quest(let x): return x.groupedForRepeat + "?"
        case .begin: return "^"
        case .end: return "$"
        }
    }

    private var groupedForConcat: String {
        if case .alternate = self { return "(" + pattern + ")" }
        return pattern
    }

    private var groupedForRepeat: String {
        switch self {
        case .literal, .dot, .charClass: return pattern
        default: return "(?:" + pattern + ")"
        }
    }
}

/// Naive backtracking matcher with continuations (exponential in the worst case; inputs are tiny).
enum Backtracker {
    static func match(_ node: RefNode, _ s: [UInt8], _ i: Int, _ k: (Int) -> Bool) -> Bool {
        switch node {
        case .literal(let c):
            return i < s.count && s[i] == c && k(i + 1)
        case .dot:
            return i < s.count && s[i] != 10 && k(i + 1)
        case .charClass(let set, let negated):
            return i < s.count && set.contains(s[i]) != negated && k(i + 1)
        case .concat(let parts):
            func step(_ index: Int, _ pos: Int) -> Bool {
                index == parts.count ? k(pos) : match(parts[index], s, pos) { step(index + 1, $0) }
            }
            return step(0, i)
        case .alternate(let parts):
            return parts.contains { match($0, s, i, k) }
        case .star(let x):
            // Only non-empty iterations recurse, which keeps the search finite.
            return match(x, s, i) { j in j > i && match(.star(x), s, j, k) } || k(i)
        case .plus(let x):
            return match(x, s, i) { j in match(.star(x), s, j, k) }
        case .quest(let x):
            return match(x, s, i, k) || k(i)
        case .begin:
            return i == 0 && k(i)
        case .end:
            return i == s.count && k(i)
        }
    }

    static func search(_ node: RefNode, _ s: [UInt8]) -> Bool {
        (0...s.count).contains { start in match(node, s, start) { _ in true } }
    }
}

struct RefGenerator {
    var rng: SeededGenerator

    mutating func node(depth: Int) -> RefNode {
        let leafOnly = depth <= 0
        switch Int.random(in: 0..<(leafOnly ? 5 : 10), using: &rng) {
        case 0, 1: return .literal([UInt8(ascii: "a"), UInt8(ascii: "b"), UInt8(ascii: "c")].randomElement(using: &rng)!)
        case 2: return .dot
        case 3:
            var set = Set<UInt8>()
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                set.insert([UInt8(ascii: "a"), UInt8(ascii: "b")].randomElement(using: &rng)!)
            }
            return .charClass(set, negated: Bool.random(using: &rng))
        case 4: return Int.random(in: 0..<6, using: &rng) == 0 ? (Bool.random(using: &rng) ? .begin : .end) : .literal(UInt8(ascii: "a"))
        case 5, 6: return .concat((0..<Int.random(in: 2...3, using: &rng)).map { _ in node(depth: depth - 1) })
        case 7: return .alternate((0..<Int.random(in: 2...3, using: &rng)).map { _ in node(depth: depth - 1) })
        case 8: return Bool.random(using: &rng) ? .star(node(depth: depth - 1)) : .plus(node(depth: depth - 1))
        default: return .quest(node(depth: depth - 1))
        }
    }

    mutating func text() -> [UInt8] {
        let alphabet: [UInt8] = [UInt8(ascii: "a"), UInt8(ascii: "b"), UInt8(ascii: "c"), 10]
        return (0..<Int.random(in: 0...10, using: &rng)).map { _ in
            Int.random(in: 0..<10, using: &rng) == 0 ? alphabet[3] : alphabet[Int.random(in: 0..<3, using: &rng)]
        }
    }
}

@Suite(.ownThreads) struct DifferentialTests {
    @Test func randomPatternsAgreeWithBacktracker() throws {
        var generator = RefGenerator(rng: SeededGenerator(seed: 0x5EED_2024))
        var checked = 0
        for _ in 0..<600 {
            let node = generator.node(depth: 4)
            let pattern = node.pattern
            let regex = try LineRegex(pattern)
            for _ in 0..<6 {
                let text = generator.text()
                let expected = Backtracker.search(node, text)
                let actual = regex.matches(text)
                #expect(actual == expected, "pattern \(pattern) text \(String(decoding: text, as: UTF8.self).debugDescription)")
                checked += 1
            }
        }
        #expect(checked == 3600)
    }
}
