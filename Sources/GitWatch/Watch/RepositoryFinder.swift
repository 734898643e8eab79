import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Turns the paths a chat touched into repository roots: absolute
/// paths only; a file's directory is searched from; the innermost repository wins (nested
/// repositories, linked worktrees and submodules are their own roots). Beyond the reference,
/// a directory inside no repository has the repositories directly below it watched (a
/// project cloned into the working directory), at most ``maxChildren`` of them.
enum RepositoryFinder {
    static let maxChildren = 64

    static func roots(for paths: [String]) -> Set<String> {
        var roots: Set<String> = []
        for path in paths where path.hasPrefix("/") {
            var isDirectory = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let start = exists && isDirectory ? path : parentDirectory(of: path)
            if let root = GitSnapshotter.repositoryRoot(containing: start) {
                roots.insert(resolved(root))
                continue
            }
            guard exists, isDirectory,
                let children = try? FileManager.default.contentsOfDirectory(atPath: path)
            else { continue }
            var found = 0
            for child in children.sorted() where found < maxChildren {
                let candidate = path + "/" + child
                guard FileManager.default.fileExists(atPath: candidate + "/.git"),
                    let root = GitSnapshotter.repositoryRoot(containing: candidate)
                else { continue }
                roots.insert(resolved(root))
                found += 1
            }
        }
        return roots
    }

    static func resolved(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }

    /// The repository at `root` is gone: its directory or `.git` is
    /// missing, or `.git` is a file (worktree, submodule) whose git directory is missing.
    static func isGone(_ root: String) -> Bool {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: root + "/.git", isDirectory: &isDirectory) else { return true }
        if isDirectory { return false }
        // Read without blocking or following a link, and small: a FIFO at `.git` (any process
        // of the workspace can make one) had held a git thread, one of two, for ever.
        guard let bytes = AtomicFile.read(root + "/.git", maxBytes: 64 << 10),
            let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first, line.hasPrefix("gitdir:")
        else { return false }
        let target = line.dropFirst("gitdir:".count).trimmingSpaces()
        let path = target.hasPrefix("/") ? target : root + "/" + target
        return !FileManager.default.fileExists(atPath: path)
    }
}
