/// What a context resource is: the names are the reference's (they appear in resource ids,
/// in the aggregate hash and in the JSON the context routes answer).
public enum ContextResourceKind: Int, Sendable, Equatable, Comparable, CaseIterable {
    case instructionFile = 1
    case skill = 2
    case mcpConfig = 3
    case mcpServer = 4

    public var name: String {
        switch self {
        case .instructionFile: "instruction_file"
        case .skill: "skill"
        case .mcpConfig: "mcp_config"
        case .mcpServer: "mcp_server"
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Whether a resource's payload is there, and if not why.
public enum ContextResourceStatus: Sendable, Equatable, CaseIterable {
    case ok, oversize, unreadable, invalid, excluded

    public var name: String {
        switch self {
        case .ok: "ok"
        case .oversize: "oversize"
        case .unreadable: "unreadable"
        case .invalid: "invalid"
        case .excluded: "excluded"
        }
    }
}

/// One tool of a live MCP server, as the catalog publishes it.
public struct ContextTool: Sendable, Equatable {
    /// The tool's own (unprefixed) name.
    public var name: String
    public var description: String
    /// The reduced JSON Schema of its input (`type`, `properties`, `required`), if any.
    public var inputSchema: JSONValue?

    public init(name: String, description: String = "", inputSchema: JSONValue? = nil) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
    }
}

/// One resolved piece of workspace context: an instruction file, a skill, an `.mcp.json`
/// (or one of its entries), or a live MCP server.
public struct ContextResource: Sendable, Equatable {
    public var kind: ContextResourceKind
    /// A file path (the link target for instruction files), a skill directory, or a server name.
    public var source: String
    /// The user-declared source whose root produced this resource; nil for built-in roots.
    public var sourcePath: String?
    /// sha256 of the bytes read (all zero when nothing could be read).
    public var contentHash: [UInt8]
    /// The file's size on disk.
    public var sizeBytes: UInt64
    public var status: ContextResourceStatus
    /// Why the status is not `ok` (or a warning when it is); empty otherwise.
    public var error: String
    /// A skill's or server's name; empty for other kinds.
    public var name: String
    /// A skill's front-matter description, or an instruction file's first line.
    public var description: String
    /// The bytes sent upward: an instruction file's content or a raw SKILL.md, only when `ok`.
    public var payload: [UInt8]
    /// A live server's tools.
    public var tools: [ContextTool]

    public init(
        kind: ContextResourceKind, source: String, sourcePath: String? = nil,
        contentHash: [UInt8] = ContextResource.zeroHash, sizeBytes: UInt64 = 0,
        status: ContextResourceStatus = .ok, error: String = "", name: String = "", description: String = "",
        payload: [UInt8] = [], tools: [ContextTool] = []
    ) {
        self.kind = kind
        self.source = source
        self.sourcePath = sourcePath
        self.contentHash = contentHash
        self.sizeBytes = sizeBytes
        self.status = status
        self.error = error
        self.name = name
        self.description = description
        self.payload = payload
        self.tools = tools
    }

    public static let zeroHash = [UInt8](repeating: 0, count: 32)

    /// `<kind>:<source>`: unique within a snapshot, the sort key, and part of the hash.
    public var id: String { kind.name + ":" + source }
}

/// The context the agent publishes: every resource, sorted by id, and the hash a control
/// plane compares to tell whether pinned instructions or skills drifted.
public struct ContextSnapshot: Sendable, Equatable {
    /// Per process, from 1; 0 is the empty snapshot before the first resolve.
    public var version: UInt64
    public var aggregateHash: [UInt8]
    public var resources: [ContextResource]
    /// The sum of the resources' payload sizes.
    public var payloadBytes: UInt64
    /// A snapshot-level problem (a cap hit, a degraded watcher); empty when healthy.
    public var snapshotError: String

    public init(
        version: UInt64 = 0, aggregateHash: [UInt8]? = nil, resources: [ContextResource] = [],
        payloadBytes: UInt64? = nil, snapshotError: String = ""
    ) {
        self.version = version
        self.resources = resources
        self.aggregateHash = aggregateHash ?? Self.aggregateHash(of: resources)
        self.payloadBytes = payloadBytes ?? resources.reduce(0) { $0 + UInt64($1.payload.count) }
        self.snapshotError = snapshotError
    }

    /// The empty snapshot served before the first resolve.
    public static let empty = ContextSnapshot()

    /// sha256 over the resources other than `mcp_config` and `mcp_server`, sorted by id
    /// (bytewise); per resource: id, kind name and source as `<decimal length>:<bytes>`,
    /// the 32 hash bytes, the status name the same way, then one NUL byte. The control
    /// plane compares it with the hash a chat pinned, so MCP changes never mark a chat stale.
    public static func aggregateHash(of resources: [ContextResource]) -> [UInt8] {
        let drift =
            resources
            .filter { $0.kind != .mcpConfig && $0.kind != .mcpServer }
            .sorted { bytewisePrecedes($0.id, $1.id) }
        var hash = SHA256()
        func field(_ text: String) {
            hash.update(Array(String(text.utf8.count).utf8))
            hash.update([UInt8(ascii: ":")])
            hash.update(Array(text.utf8))
        }
        for resource in drift {
            field(resource.id)
            field(resource.kind.name)
            field(resource.source)
            hash.update(resource.contentHash)
            field(resource.status.name)
            hash.update([0])
        }
        return hash.finalize()
    }
}

/// Go's `strings.Compare` order (by UTF-8 bytes), which differs from Swift's `<` on String.
public func bytewisePrecedes(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}
