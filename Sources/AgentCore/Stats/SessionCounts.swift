import Synchronization

/// The sessions running now by kind, as `UpdateStats` reports them (`session_count_ssh`,
/// `_vscode`, `_jetbrains`, `_reconnecting_pty`): the SSH server and the reconnecting PTY
/// count, the stats report reads.
public final class SessionCounts: Sendable {
    public enum Kind: Int, Sendable, CaseIterable {
        case ssh, vscode, jetbrains, reconnectingPTY
    }

    private let counts = Mutex([Int](repeating: 0, count: Kind.allCases.count))

    public init() {}

    /// One more session of `kind`; balance it with ``ended(_:)``.
    public func started(_ kind: Kind) {
        counts.withLock { $0[kind.rawValue] += 1 }
    }

    public func ended(_ kind: Kind) {
        counts.withLock { $0[kind.rawValue] = max(0, $0[kind.rawValue] - 1) }
    }

    public func count(_ kind: Kind) -> Int {
        counts.withLock { $0[kind.rawValue] }
    }
}
