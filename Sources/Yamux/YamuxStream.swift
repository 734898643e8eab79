/// One yamux stream: an ordered, flow-controlled byte stream inside a session.
///
/// A handle: cheap to copy; every operation goes through the owning ``YamuxSession``.
public struct YamuxStream: Sendable, Hashable {
    public let id: UInt32
    let session: YamuxSession

    /// The next bytes (up to what is buffered), or nil at EOF (the peer's FIN).
    /// Throws ``YamuxSessionError/streamReset`` after RST.
    public func read() async throws -> [UInt8]? {
        try await session.read(id)
    }

    /// Sends `bytes`, waiting for window credit as needed (never overruns the peer).
    public func write(_ bytes: [UInt8]) async throws {
        try await session.write(id, bytes)
    }

    /// Half-closes: sends FIN; reading continues until the peer's FIN.
    public func closeWrite() async {
        await session.closeWrite(id)
    }

    /// Aborts the stream both ways (RST).
    public func reset() async {
        await session.reset(id)
    }

    public static func == (a: YamuxStream, b: YamuxStream) -> Bool { a.id == b.id && a.session === b.session }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}
