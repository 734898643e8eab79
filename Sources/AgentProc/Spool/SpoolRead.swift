/// The answer to `OutputSpool.read(from:limit:)`, shaped like the
/// `GET /output?offset=N&limit=M` response.
///
/// All values are logical offsets in the whole output of the process (byte 0 is the
/// first byte the process ever wrote), so a client can resume with `next` no matter how
/// much was dropped in between.
public struct SpoolRead: Sendable, Equatable {
    /// The bytes `[offset, next)`; empty when nothing is available at or after the request.
    public var bytes: [UInt8]
    /// Logical offset of `bytes[0]` (the requested offset, raised to `dropped` if older bytes are gone).
    public var offset: UInt64
    /// Where the next read should start: `offset + bytes.count`, never beyond `end`.
    public var next: UInt64
    /// Logical offset of the oldest byte still kept when the read was served.
    public var dropped: UInt64
    /// Logical end of the output (total bytes ever appended) when the read was served.
    public var end: UInt64

    public init(bytes: [UInt8], offset: UInt64, next: UInt64, dropped: UInt64, end: UInt64) {
        self.bytes = bytes
        self.offset = offset
        self.next = next
        self.dropped = dropped
        self.end = end
    }
}
