import AgentCore

/// The snapshot as the context routes answer it: hashes in hex, no payloads.
struct ContextSnapshotJSON: Encodable, Sendable {
    var version: UInt64
    var aggregateHash: String
    var resources: [Resource]
    var payloadBytes: UInt64
    var snapshotError: String?

    struct Resource: Encodable, Sendable {
        var id: String
        var kind: String
        var source: String
        var sourcePath: String?
        var contentHash: String
        var sizeBytes: UInt64
        var status: String
        var error: String?
        var name: String?
        var description: String?

        enum CodingKeys: String, CodingKey {
            case id, kind, source, sourcePath = "source_path", contentHash = "content_hash", sizeBytes = "size_bytes"
            case status, error, name, description
        }
    }

    enum CodingKeys: String, CodingKey {
        case version, aggregateHash = "aggregate_hash", resources, payloadBytes = "payload_bytes", snapshotError = "snapshot_error"
    }

    init(_ snapshot: ContextSnapshot) {
        version = snapshot.version
        aggregateHash = SHA256.hexString(snapshot.aggregateHash)
        payloadBytes = snapshot.payloadBytes
        snapshotError = snapshot.snapshotError.isEmpty ? nil : snapshot.snapshotError
        resources = snapshot.resources.map { r in
            Resource(
                id: r.id, kind: r.kind.name, source: r.source, sourcePath: r.sourcePath.flatMap { $0.isEmpty ? nil : $0 },
                contentHash: SHA256.hexString(r.contentHash), sizeBytes: r.sizeBytes, status: r.status.name,
                error: r.error.isEmpty ? nil : r.error, name: r.name.isEmpty ? nil : r.name,
                description: r.description.isEmpty ? nil : r.description)
        }
    }
}

/// `{"path"}`: a source in the sources API.
struct ContextSourceJSON: Encodable, Sendable {
    var path: String
}
