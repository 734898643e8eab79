/// One yamux stream: an ordered, flow-controlled byte stream inside a session.
///
/// A handle: cheap to copy; every operation goes through the owning ``YamuxSession``.
/// The operations run on their caller's executor (`nonisolated(nonsending)`), so code
/// already isolated to the session calls them without a hop.
public struct YamuxStream: Sendable, Hashable {
    public let id: UInt32
    public let session: YamuxSession

    /// The next bytes (up to what is buffered), or nil at EOF (the peer's FIN).
    /// Throws ``YamuxSessionError/streamReset`` after RST.
    nonisolated(nonsending) public func read() async throws(YamuxSessionError) -> [UInt8]? {
        try await session.read(id)
    }

    /// Sends `bytes`, waiting for window credit as needed (never overruns the peer).
    nonisolated(nonsending) public func write(_ bytes: [UInt8]) async throws(YamuxSessionError) {
        try await session.write(id, bytes)
    }

    /// Half-closes: sends FIN; reading continues until the peer's FIN.
    nonisolated(nonsending) public func closeWrite() async {
        await session.closeWrite(id)
    }

    /// Ends this side for good: FIN, and nothing more is read (unread data is dropped),
    /// so the session forgets the stream once the peer's FIN arrives — what Go's
    /// `Stream.Close` amounts to for a caller that stops reading.
    nonisolated(nonsending) public func close() async {
        await session.closeStream(id)
    }

    /// Aborts the stream both ways (RST).
    nonisolated(nonsending) public func reset() async {
        await session.reset(id)
    }

    public static func == (a: YamuxStream, b: YamuxStream) -> Bool { a.id == b.id && a.session === b.session }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}
