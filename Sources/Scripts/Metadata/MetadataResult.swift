import FoundationEssentials

/// One collection of one metadata key (`WorkspaceAgentMetadata.Result` without `age`,
/// which the reference never sets).
public struct MetadataResult: Sendable, Equatable {
    /// The agent's wall-clock time when the collection started.
    public var collectedAt: Date
    /// The command's combined stdout and stderr, at most ``MetadataReporter/maxValueBytes``.
    public var value: String
    /// Empty when the collection went well; a value may come with an error.
    public var error: String

    public init(collectedAt: Date, value: String, error: String) {
        self.collectedAt = collectedAt
        self.value = value
        self.error = error
    }
}
