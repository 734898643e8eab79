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

extension ChangesMessage {
    /// The most one `changes` frame may hold: coderd reads the agent's socket with a 4 MiB
    /// limit (`1<<22`), and a larger frame ends the relay (and the CLI's first read) with
    /// 1009. A margin is kept for the frame's own keys.
    static let maxFrameBytes = (1 << 22) - 1024

    /// One scan's changes as frames of at most `limit` bytes of JSON each, the repositories
    /// in order, as many to a frame as fit (a repository too large alone goes alone: its
    /// diff is cut at 3 MiB, so only a diff of mostly escaped bytes can pass the limit).
    /// Clients keep a map by `repo_root` that each entry replaces, so several frames of one
    /// scan mean what one would. Almost always one frame: each entry is measured only when
    /// the whole message is over the limit.
    static func frames(
        scannedAt: String, changed: [RepositoryEntry], limit: Int = maxFrameBytes, encode: (any Encodable) throws -> [UInt8]
    ) rethrows -> [[UInt8]] {
        let whole = try encode(ChangesMessage(scannedAt: scannedAt, repositories: changed.isEmpty ? nil : changed))
        guard whole.count > limit, changed.count > 1 else { return [whole] }
        let overhead = try encode(ChangesMessage(scannedAt: scannedAt, repositories: [])).count
        var frames: [[UInt8]] = []
        var group: [RepositoryEntry] = []
        var size = overhead
        for entry in changed {
            let entrySize = try encode(entry).count + 1
            if !group.isEmpty, size + entrySize > limit {
                frames.append(try encode(ChangesMessage(scannedAt: scannedAt, repositories: group)))
                group = []
                size = overhead
            }
            group.append(entry)
            size += entrySize
        }
        if !group.isEmpty { frames.append(try encode(ChangesMessage(scannedAt: scannedAt, repositories: group))) }
        return frames
    }
}

struct ErrorMessage: Encodable, Sendable {
    var type = "error"
    var message: String
}
