import AgentCore

/// coderd's `/reinit` server-sent events read as the reference's SDK reads them, without I/O:
/// blank lines skipped, `event: ping` alone, `event: data` followed by a `data: <json>` line.
/// `event: error`, another type, a line of another form or bad JSON end the stream with an error.
/// Bounded: a line longer than ``maxLineBytes`` is an error, so at most that much is held.
public struct ReinitStreamParser: Sendable {
    /// The longest line kept (an event is two lines; coderd's are about 150 bytes).
    public static let maxLineBytes = 16 << 10

    public enum Item: Sendable, Equatable {
        case ping
        case event(ReinitEvent)
    }

    public struct Failure: Error, CustomStringConvertible, Equatable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    private var line: [UInt8] = []
    /// The type named by the last `event:` line, waiting for its `data:` line.
    private var pendingType: String?
    private var failed: Failure?

    public init() {}

    /// Feeds the stream's next bytes; returns what they completed before any failure, so no
    /// event is lost to bytes after it; a failure is thrown when nothing came before it, else
    /// by the next call. Once it has thrown, it throws the same failure again.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(Failure) -> [Item] {
        if let failed { throw failed }
        var items: [Item] = []
        do throws(Failure) {
            for byte in bytes {
                guard byte == UInt8(ascii: "\n") else {
                    guard line.count < Self.maxLineBytes else { throw fail("line longer than \(Self.maxLineBytes >> 10) KiB") }
                    line.append(byte)
                    continue
                }
                defer { line.removeAll(keepingCapacity: line.count <= 1024) }
                if let item = try take(String(decoding: line, as: UTF8.self)) { items.append(item) }
            }
        } catch {
            if items.isEmpty { throw error }
        }
        return items
    }

    private mutating func fail(_ reason: String) -> Failure {
        let failure = Failure(description: reason)
        failed = failure
        return failure
    }

    private mutating func take(_ text: String) throws(Failure) -> Item? {
        if text.trimmingWhitespace().isEmpty { return nil }
        if let type = pendingType {
            pendingType = nil
            guard text.hasPrefix("data: ") else { throw fail("expecting data event, got: \(String(text.prefix(200)))") }
            let payload = String(text.dropFirst("data: ".count)).trimmingWhitespace()
            if type == "error" { throw fail("unexpected server sent event type error") }
            return .event(try decode(payload))
        }
        guard text.hasPrefix("event: ") else { throw fail("expecting event event, got: \(String(text.prefix(200)))") }
        let type = String(text.dropFirst("event: ".count)).trimmingWhitespace()
        switch type {
        case "ping":
            return .ping
        case "data", "error":
            pendingType = type
            return nil
        default:
            throw fail("unknown event type: \(String(type.prefix(200)))")
        }
    }

    /// `{"workspace_id", "reason", "owner_id"?}` as Go decodes it into the SDK's struct.
    private mutating func decode(_ payload: String) throws(Failure) -> ReinitEvent {
        guard let value = try? JSONValue.parseWhole(Array(payload.utf8)), case .object = value else {
            throw fail("unmarshal reinit response: not a JSON object")
        }
        func text(_ name: String) throws(Failure) -> String? {
            guard let member = value[name], member != .null else { return nil }
            guard let string = member.stringValue else { throw fail("unmarshal reinit response: \(name) is not a string") }
            return string
        }
        let workspace = try text("workspace_id") ?? Self.zeroUUID
        let owner = try text("owner_id")
        for id in [workspace, owner ?? Self.zeroUUID] where !Self.isUUID(id) {
            throw fail("unmarshal reinit response: invalid UUID \(goQuote(String(id.prefix(64))))")
        }
        return ReinitEvent(
            workspaceID: workspace.lowercased(), reason: try text("reason") ?? "",
            ownerID: owner.map { $0.lowercased() }.flatMap { $0 == Self.zeroUUID ? nil : $0 })
    }

    static let zeroUUID = "00000000-0000-0000-0000-000000000000"

    /// The canonical 8-4-4-4-12 hex form (what coderd sends).
    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                let hex = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
                guard hex else { return false }
            }
        }
        return true
    }
}
