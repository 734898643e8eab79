/// Store-wide counters, monotonically increasing for the life of an `OutputSpoolStore`.
///
/// They exist so the agent can expose spooling health (how much output was lost and why)
/// without scanning the disk.
public struct SpoolCounters: Sendable, Equatable {
    /// Bytes successfully written to segment files.
    public var bytesWritten: UInt64 = 0
    /// Bytes dropped because a spool exceeded `Limits.maxBytesPerSpool` (its own oldest segment was recycled).
    public var bytesDroppedPerSpoolCap: UInt64 = 0
    /// Bytes dropped because the store exceeded `Limits.maxTotalBytes` (globally oldest segment evicted).
    public var bytesDroppedTotalCap: UInt64 = 0
    /// Bytes dropped because of a write error (they, and everything before them, became `dropped`).
    public var bytesDroppedWriteErrors: UInt64 = 0
    /// Number of failed I/O operations on the write path (segment pwrite/open/rename, cursor pwrite).
    public var writeErrors: UInt64 = 0
    /// Number of segment files reused by rename + overwrite instead of unlink + create.
    public var segmentsRecycled: UInt64 = 0

    public init() {}
}
