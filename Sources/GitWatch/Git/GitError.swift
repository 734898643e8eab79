import CGit2
import CGitScan

/// A libgit2 failure: the call and libgit2's own message.
public struct GitError: Error, CustomStringConvertible, Sendable {
    public var call: String
    public var code: Int32
    public var message: String

    public var description: String { "\(call): \(message) (\(code))" }

    /// A working-tree file changed size while libgit2 had it mapped: the scan was abandoned
    /// (the next one retries) instead of the agent taking SIGBUS.
    public var isFileChangedDuringScan: Bool { code == AGENT_GIT_FILE_CHANGED }

    /// Throws for a negative libgit2 result.
    static func check(_ result: Int32, _ call: String) throws(GitError) {
        guard result < 0 else { return }
        let text = git_error_last().map { String(cString: $0.pointee.message) } ?? "unknown error"
        throw GitError(call: call, code: result, message: text)
    }
}

/// libgit2's process-wide setup, once.
enum GitLibrary {
    private static let initialized: Bool = {
        git_libgit2_init()
        // A working-tree file truncated under libgit2's mapping fails the scan (CGitScan.h).
        agent_git_install_fault_guard()
        return true
    }()

    static func ensure() { _ = initialized }
}
