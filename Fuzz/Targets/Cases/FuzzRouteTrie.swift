import AgentHTTP

/// The router's trie (AgentHTTP's `RouteTrie`, which every request's path goes through):
/// patterns of literals and captures (`:x`, `{z}`) and a path, built from a small alphabet so
/// that they meet, or the path from raw bytes. Never a trap; patterns with two capture names
/// at one place are refused; otherwise the answer is what the documented rules give, read
/// here a different way, over every pattern prefix at once rather than down the trie: the
/// path's components (empty ones skipped) match a prefix of some pattern, component by
/// component (a literal byte for byte, a capture anything); the first component keeps to the
/// literal branch when one equals it; of the rest, the first in literal-before-capture order
/// is taken, and the answer is the first pattern that ends exactly there, or nothing; its
/// captures hold their components' byte ranges.
public func fuzzRouteTrie(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let alphabet = ["a", "b", "c", ":x", ":y", "{z}", "a", "{}"]
    var patterns: [String] = []
    for _ in 0..<(Int(input.byte() % 8) + 1) {
        let count = Int(input.byte() % 5)
        patterns.append("/" + (0..<count).map { _ in alphabet[Int(input.byte()) % alphabet.count] }.joined(separator: "/"))
    }
    let path: String
    if input.byte() % 4 == 0 {
        path = String(decoding: input.rest(), as: UTF8.self)
    } else {
        let words = ["a", "b", "c", "d", "", "x"]
        path = "/" + (0..<Int(input.byte() % 6)).map { _ in words[Int(input.byte()) % words.count] }.joined(separator: "/")
    }
    guard let answer = HTTPFuzzing.route(path, among: patterns) else {
        require(hasTwoCaptureNamesAtOnePlace(patterns), "patterns refused: \(patterns)")
        return 0
    }
    let expected = expectedRoute(Array(path.utf8), patterns)
    require(answer?.index == expected?.index, "\(path.debugDescription) among \(patterns): \(String(describing: answer?.index)), expected \(String(describing: expected?.index))")
    // A name used at two places may be recorded at both (the trie keeps the last one seen,
    // also on a branch that failed), so captures are checked when each name has one place.
    guard let answer, let expected, namesHaveOnePlaceEach(patterns) else { return 0 }
    for (name, range) in expected.captures {
        require(answer.captures.contains { $0.name == name && $0.range == range }, "capture \(name) is not \(range): \(answer.captures)")
    }
    return 0
}

/// A pattern's component: a literal's bytes, or a capture's name.
private enum Part: Hashable {
    case literal([UInt8])
    case capture(String)

    init(_ text: Substring) {
        if text.first == ":" {
            self = .capture(String(text.dropFirst()))
        } else if text.first == "{", text.last == "}", text.count > 2 {
            self = .capture(String(text.dropFirst().dropLast()))
        } else {
            self = .literal(Array(text.utf8))
        }
    }

    var isCapture: Bool { if case .capture = self { true } else { false } }
}

private func parts(_ pattern: String) -> [Part] {
    pattern.split(separator: "/").map(Part.init)
}

/// Every capture of every pattern with its place: the components before it, captures named
/// alike (the trie's node).
private func capturePlaces(_ patterns: [String]) -> [(name: String, place: [Part])] {
    patterns.map(parts).flatMap { split in
        split.enumerated().compactMap { index, part -> (name: String, place: [Part])? in
            guard case .capture(let name) = part else { return nil }
            return (name, split[..<index].map { $0.isCapture ? Part.capture("") : $0 })
        }
    }
}

/// True when two patterns put differently named captures at the same place.
private func hasTwoCaptureNamesAtOnePlace(_ patterns: [String]) -> Bool {
    Dictionary(grouping: capturePlaces(patterns), by: \.place).values.contains { Set($0.map(\.name)).count > 1 }
}

/// True when no capture name is used at two places.
private func namesHaveOnePlaceEach(_ patterns: [String]) -> Bool {
    !Dictionary(grouping: capturePlaces(patterns), by: \.name).values.contains { Set($0.map(\.place)).count > 1 }
}

/// The pattern `path` resolves to by the documented rules, and the captures of its branch.
private func expectedRoute(_ path: [UInt8], _ patterns: [String]) -> (index: Int, captures: [(String, Range<Int>)])? {
    // The path's components: byte ranges between slashes, empty ones skipped.
    var components: [Range<Int>] = []
    var start = 0
    for index in 0...path.count where index == path.count || path[index] == UInt8(ascii: "/") {
        if index > start { components.append(start..<index) }
        start = index + 1
    }
    let split = patterns.map(parts)
    func matches(_ part: Part, _ range: Range<Int>) -> Bool {
        if case .literal(let text) = part { return text == Array(path[range]) }
        return true
    }
    // Every prefix of the path's length of every pattern that matches it, captures unnamed
    // (the trie's nodes).
    var candidates: [[Part]] = []
    for pattern in split where pattern.count >= components.count {
        let prefix = Array(pattern[..<components.count])
        guard zip(prefix, components).allSatisfy(matches) else { continue }
        candidates.append(prefix)
    }
    if let first = components.first {
        // The first component keeps to the literal branch when some pattern starts with it.
        let literalFirst = split.contains { $0.first.map { !$0.isCapture && matches($0, first) } ?? false }
        candidates = candidates.filter { $0[0].isCapture != literalFirst }
    }
    // Literal before capture, component by component.
    func before(_ a: [Part], _ b: [Part]) -> Bool {
        for (x, y) in zip(a, b) where x.isCapture != y.isCapture { return !x.isCapture }
        return false
    }
    guard let chosen = candidates.min(by: before) else { return nil }
    let unnamed = { (parts: [Part]) in parts.map { $0.isCapture ? Part.capture("") : $0 } }
    guard let index = split.firstIndex(where: { $0.count == chosen.count && unnamed($0) == unnamed(chosen) }) else { return nil }
    let captures = zip(split[index], components).compactMap { part, range -> (String, Range<Int>)? in
        if case .capture(let name) = part { return (name, range) }
        return nil
    }
    return (index, captures)
}
