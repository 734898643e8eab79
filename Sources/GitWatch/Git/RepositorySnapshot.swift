/// What a chat's UI shows of one repository: its branch, its origin and
/// the diff of the working tree against HEAD, untracked files included.
public struct RepositorySnapshot: Sendable, Equatable {
    public var repoRoot: String
    /// "" for a detached HEAD.
    public var branch: String
    /// `remote.origin.url`, or "".
    public var remoteOrigin: String
    public var unifiedDiff: String
    /// The diff stopped at a file boundary at ``GitSnapshotter/maxDiffBytes``.
    public var diffTruncated: Bool
}
