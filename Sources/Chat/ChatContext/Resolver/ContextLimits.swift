/// The bounds of one resolve. The first three are the reference's caps (what the control
/// plane expects); the rest bound the time and memory a hostile tree can cost.
public struct ContextLimits: Sendable, Equatable {
    /// A file larger than this is `oversize`: no payload, hash of its first this-many bytes.
    public var resourceBytes = 64 * 1024
    /// Payload bytes in one snapshot; OK resources past it (in kind, source order) are `excluded`.
    public var snapshotBytes = 2 * 1024 * 1024
    /// Resources counted in one snapshot; those past it are `excluded`.
    public var resources = 500
    /// Resources listed at all (counted ones plus `excluded` rows): the control plane
    /// refuses a push of more than 1000; the rest are left out and reported.
    public var listedResources = 1000
    /// Files examined (stat, read, hashed) in one resolve, in root order: with the per-file
    /// cap this bounds a resolve's reads to 64 MiB however large the tree.
    public var examinedFiles = 1000
    /// Entries read from one directory (a root or a skills container), in the order the
    /// kernel gives them; the rest are not looked at, and the snapshot says so.
    public var directoryEntries = 65_536
    /// Scan roots walked; later ones are ignored, and the snapshot says so.
    public var scanRoots = 128
    /// Rows for bad `.mcp.json` entries, per file.
    public var mcpEntryRowsPerFile = 32
    /// A skill description kept, in bytes (cut on a character boundary).
    public var descriptionBytes = 4096

    public init() {}

    public static let `default` = ContextLimits()
}

/// One place the resolver looks: a directory (its top level and its skills containers) or
/// a single file.
public struct ContextScanRoot: Sendable, Equatable {
    /// Absolute, with symlinks already resolved.
    public var path: String
    /// The user-declared source this root came from (its `source_path`); nil for built-ins.
    public var userSource: String?

    public init(path: String, userSource: String? = nil) {
        self.path = path
        self.userSource = userSource
    }
}
