/// What a start asks for beyond the reference's fields: a stdin pipe or a terminal.
public struct StartOptions: Sendable, Equatable, Codable {
    /// A pseudo-terminal's size and `TERM`.
    public struct Terminal: Sendable, Equatable, Codable {
        public var rows: UInt16
        public var cols: UInt16
        /// `TERM` in the child's environment (default `xterm-256color`).
        public var term: String?

        public init(rows: UInt16, cols: UInt16, term: String? = nil) {
            self.rows = rows
            self.cols = cols
            self.term = term
        }
    }

    /// Keep a pipe to the child's stdin (`"stdin": true`); implied by ``terminal``.
    public var stdin: Bool
    /// Run on a pseudo-terminal (`"pty": {...}`).
    public var terminal: Terminal?

    public init(stdin: Bool = false, terminal: Terminal? = nil) {
        self.stdin = stdin || terminal != nil
        self.terminal = terminal
    }

    /// Largest rows or columns accepted.
    public static let maxDimension: UInt16 = 10_000
    /// `TERM` when the request names none.
    public static let defaultTerm = "xterm-256color"

    enum CodingKeys: String, CodingKey {
        case stdin
        case terminal = "pty"
    }

    var spawnInput: SpawnInput {
        if let terminal { return .terminal(rows: terminal.rows, cols: terminal.cols) }
        return stdin ? .pipe : .none
    }
}
