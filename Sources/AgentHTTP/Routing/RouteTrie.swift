#if canImport(Glibc)
import Glibc
#endif

/// Path components to values, matched on the path's bytes: a literal equals a component
/// byte for byte (no Unicode normalization, no percent-decoding, as chi compares them),
/// `:name` captures one component.
///
/// The rules (Hummingbird's trie's, which the agent's routes were written against): empty
/// components are skipped (`//a/` is `/a`); at each node a literal equal to the component
/// comes before the capture; the first component is matched once (no other child of the
/// root is tried if the search below it fails), deeper ones fall back from the literal to
/// the capture; the search ends at the node where the components run out, with or without
/// a value there; a capture records its parameter as soon as it matches, also on a branch
/// that fails later.
struct RouteTrie<Value: Sendable>: Sendable {
    /// One route's path, split.
    enum Component: Equatable {
        case literal([UInt8])
        case capture(Substring)
    }

    /// A captured parameter: its name and the component's byte range in the path.
    struct Capture {
        var name: Substring
        var range: Range<Int>
    }

    final class Node: Sendable {
        let literals: [(text: [UInt8], node: Node)]
        let capture: (name: Substring, node: Node)?
        let value: Value?

        init(literals: [(text: [UInt8], node: Node)], capture: (name: Substring, node: Node)?, value: Value?) {
            self.literals = literals
            self.capture = capture
            self.value = value
        }
    }

    /// Why routes cannot be built into a trie.
    enum BuildError: Error, Equatable {
        /// Two capture names at one node (which one a path gets would be arbitrary).
        case captureNames(Substring, Substring)
    }

    let root: Node

    /// The trie of `routes`; the first value of equal paths keeps the path.
    init(_ routes: [(components: [Component], value: Value)]) throws(BuildError) {
        let root = Builder()
        for (components, value) in routes {
            var node = root
            for component in components {
                switch component {
                case .literal(let text):
                    node = node.literal(text)
                case .capture(let name):
                    if let existing = node.captureName, existing != name { throw .captureNames(existing, name) }
                    node.captureName = name
                    node.capture = node.capture ?? Builder()
                    node = node.capture!
                }
            }
            node.value = node.value ?? value
        }
        self.root = root.frozen()
    }

    /// `path` (`/a/:id`, `/a/{id}`) as components.
    static func components(_ path: String) -> [Component] {
        path.split(separator: "/").map { part in
            if part.first == ":" { return .capture(Substring(String(part.dropFirst()))) }
            if part.first == "{", part.last == "}", part.count > 2 { return .capture(Substring(String(part.dropFirst().dropLast()))) }
            return .literal(Array(part.utf8))
        }
    }

    /// The value `path` resolves to, with its captures (byte ranges of `path`'s UTF-8).
    func resolve(_ path: Substring) -> (value: Value, captures: [Capture])? {
        var path = path
        return path.withUTF8 { bytes in resolve(bytes) }
    }

    func resolve(_ bytes: UnsafeBufferPointer<UInt8>) -> (value: Value, captures: [Capture])? {
        var captures: [Capture] = []
        guard let first = Self.component(bytes, from: 0) else { return root.value.map { ($0, captures) } }
        // The first component: one match only.
        let node: Node
        if let literal = root.literals.first(where: { Self.equal($0.text, bytes, first) }) {
            node = literal.node
        } else if let capture = root.capture {
            Self.record(capture.name, first, &captures)
            node = capture.node
        } else {
            return nil
        }
        guard let found = Self.descend(node, bytes, after: first.upperBound, &captures), let value = found.value else { return nil }
        return (value, captures)
    }

    /// The node where the components after `position` run out below `node`, trying an equal
    /// literal before the capture at each level; nil if no branch gets there.
    private static func descend(_ node: Node, _ bytes: UnsafeBufferPointer<UInt8>, after position: Int, _ captures: inout [Capture]) -> Node? {
        guard let next = component(bytes, from: position) else { return node }
        if let literal = node.literals.first(where: { equal($0.text, bytes, next) }),
            let found = descend(literal.node, bytes, after: next.upperBound, &captures)
        {
            return found
        }
        if let capture = node.capture {
            record(capture.name, next, &captures)
            return descend(capture.node, bytes, after: next.upperBound, &captures)
        }
        return nil
    }

    /// Sets `name` to `range` (a name captured again on another branch is replaced).
    private static func record(_ name: Substring, _ range: Range<Int>, _ captures: inout [Capture]) {
        if let at = captures.firstIndex(where: { $0.name == name }) {
            captures[at].range = range
        } else {
            captures.append(Capture(name: name, range: range))
        }
    }

    /// The next component at or after `position`: separators skipped, empty ones omitted.
    private static func component(_ bytes: UnsafeBufferPointer<UInt8>, from position: Int) -> Range<Int>? {
        var start = position
        while start < bytes.count, bytes[start] == UInt8(ascii: "/") { start += 1 }
        guard start < bytes.count else { return nil }
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "/") { end += 1 }
        return start..<end
    }

    private static func equal(_ text: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        text.count == range.count
            && text.withUnsafeBufferPointer { memcmp($0.baseAddress!, bytes.baseAddress! + range.lowerBound, range.count) == 0 }
    }

    /// A node while the routes are added.
    private final class Builder {
        var literals: [(text: [UInt8], node: Builder)] = []
        var captureName: Substring?
        var capture: Builder?
        var value: Value?

        func literal(_ text: [UInt8]) -> Builder {
            if let existing = literals.first(where: { $0.text == text }) { return existing.node }
            let made = Builder()
            literals.append((text, made))
            return made
        }

        func frozen() -> Node {
            Node(literals: literals.map { ($0.text, $0.node.frozen()) }, capture: capture.map { (captureName!, $0.frozen()) }, value: value)
        }
    }
}
