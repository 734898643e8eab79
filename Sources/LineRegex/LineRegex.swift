/// A compiled RE2-syntax regular expression that answers "does this line contain a match?".
///
/// Built for untrusted patterns: there is no backtracking. Patterns compile to a Thompson NFA
/// that a Pike VM simulates, so `matches` on an n-byte line runs in O(n × programSize) time
/// and O(programSize) memory, with `programSize ≤ maxProgramSize`. Input is raw bytes,
/// decoded as UTF-8 the way Go does (each invalid byte reads as U+FFFD).
public struct LineRegex: Sendable {
    /// Longest accepted pattern, in UTF-8 bytes; longer patterns are rejected ("pattern too long").
    public static let maxPatternBytes = 4096
    /// Largest compiled program, in instructions; larger patterns are rejected ("pattern too large").
    public static let maxProgramSize = 10_000

    /// The source pattern.
    public let pattern: String
    let program: RegexProgram

    /// Compiles `pattern` (RE2 / Go `regexp` syntax) or throws a client-readable error.
    public init(_ pattern: String) throws(LineRegexError) {
        let bytes = Array(pattern.utf8)
        guard bytes.count <= LineRegex.maxPatternBytes else {
            throw LineRegexError.make("pattern too long (maximum is \(LineRegex.maxPatternBytes) bytes)")
        }
        var parser = RegexParser(bytes)
        let root = try parser.parse()
        self.pattern = pattern
        self.program = try RegexCompiler.compile(root, classes: parser.classes, limit: LineRegex.maxProgramSize)
    }

    /// True when some substring of `line` matches (unanchored search, like RE2's PartialMatch
    /// or Go's `regexp.Match`). `^`/`\A` and `$`/`\z` refer to the start and end of `line`.
    public func matches(_ line: UnsafeRawBufferPointer) -> Bool {
        var steps = 0
        return PikeVM.search(program, line, steps: &steps)
    }

    /// True when some substring of `line` matches; see `matches(_: UnsafeRawBufferPointer)`.
    public func matches(_ line: [UInt8]) -> Bool {
        line.withUnsafeBytes { matches($0) }
    }

    /// Number of compiled NFA instructions: the per-byte cost factor of `matches`.
    public var programSize: Int {
        program.insts.count
    }

    /// Like `matches`, also returning the number of VM steps taken (for complexity tests).
    func matchCountingSteps(_ line: [UInt8]) -> (matched: Bool, steps: Int) {
        var steps = 0
        let matched = line.withUnsafeBytes { PikeVM.search(program, $0, steps: &steps) }
        return (matched, steps)
    }

    /// Upper bound on `matchCountingSteps(line).steps` for an input of `byteCount` bytes.
    func stepBound(byteCount: Int) -> Int {
        (byteCount + 1) * (4 * programSize + 1)
    }
}
