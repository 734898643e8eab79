/// Joins frames into packets and enforces the receiver's rules:
///
/// - IDs (stream, message) never go backwards and a completed ID is never reused; stream 0
///   is invalid (the first valid ID is (1, 1));
/// - a frame with a newer ID discards a half-built packet;
/// - a packet may not change kind;
/// - an assembled packet may not exceed `maxPacketSize` (4 MiB);
/// - unknown kinds are ignored with the control flag and refused without it.
///
/// Memory: at most one packet of `maxPacketSize` bytes is held.
public struct DRPCPacketAssembler: Sendable {
    /// `drpcsdk.MaxMessageSize`: 4 MiB.
    public static let defaultMaxPacketSize = 4 << 20

    public let maxPacketSize: Int
    private var current: DRPCPacket?
    /// The last ID seen (completed or in progress); starts below (1, 1).
    private var lastID: (stream: UInt64, message: UInt64) = (0, 0)
    private var lastCompleted = true

    public init(maxPacketSize: Int = DRPCPacketAssembler.defaultMaxPacketSize) {
        self.maxPacketSize = maxPacketSize
    }

    /// Adds a frame; returns a packet when `frame` completed one.
    public mutating func append(_ frame: DRPCFrame) throws(DRPCWireError) -> DRPCPacket? {
        guard let kind = frame.kind else {
            if frame.control { return nil }
            throw .unknownKind(frame.rawKind)
        }
        let id = (stream: frame.streamID, message: frame.messageID)
        if id.stream == 0 { throw .idMonotonicityViolation }
        if Self.less(id, lastID) { throw .idMonotonicityViolation }
        if Self.less(lastID, id) {
            // A new packet: whatever was half-built is dropped.
            current = DRPCPacket(streamID: id.stream, messageID: id.message, kind: kind)
            lastID = id
            lastCompleted = false
        } else {
            // Same ID as the last frame.
            if lastCompleted { throw .idMonotonicityViolation }
            if current?.kind != kind { throw .kindChanged }
        }
        guard (current?.data.count ?? 0) + frame.data.count <= maxPacketSize else {
            throw .dataOverflow(limit: maxPacketSize)
        }
        current?.data.append(contentsOf: frame.data)
        guard frame.done else { return nil }
        lastCompleted = true
        defer { current = nil }
        return current
    }

    static func less(_ a: (stream: UInt64, message: UInt64), _ b: (stream: UInt64, message: UInt64)) -> Bool {
        a.stream < b.stream || (a.stream == b.stream && a.message < b.message)
    }
}
