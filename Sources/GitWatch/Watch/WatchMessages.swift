/// Server messages of the watch socket (docs/api/git.md). A heartbeat leaves `repositories`
/// out (nil), as Coder's agent does: the wire shape clients of either agent read.
struct ChangesMessage: Encodable, Sendable {
    var type = "changes"
    var scannedAt: String
    var repositories: [RepositoryEntry]?

    enum CodingKeys: String, CodingKey {
        case type, scannedAt = "scanned_at", repositories
    }
}

struct RepositoryEntry: Encodable, Sendable, Equatable {
    var repoRoot: String
    var branch: String?
    var remoteOrigin: String?
    var unifiedDiff: String?
    var removed: Bool?
    var diffTruncated: Bool?

    enum CodingKeys: String, CodingKey {
        case repoRoot = "repo_root", branch, remoteOrigin = "remote_origin", unifiedDiff = "unified_diff"
        case removed, diffTruncated = "diff_truncated"
    }

    init(_ snapshot: RepositorySnapshot) {
        repoRoot = snapshot.repoRoot
        branch = snapshot.branch
        remoteOrigin = snapshot.remoteOrigin
        unifiedDiff = snapshot.unifiedDiff
        diffTruncated = snapshot.diffTruncated
    }

    init(removed root: String) {
        repoRoot = root
        removed = true
    }
}

struct ErrorMessage: Encodable, Sendable {
    var type = "error"
    var message: String
}
