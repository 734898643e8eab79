import NIOCore

/// The byte stream a yamux session runs over (a WebSocket, a socket, a test pipe).
///
/// Every requirement is called on the session's event loop, never concurrently, and must
/// not block: a NIO channel writes without flushing-and-waiting, a test pipe hands the
/// bytes to its peer.
public protocol YamuxTransport: Sendable {
    /// Sends whole frames, in order (the buffer is the transport's to keep).
    func write(_ bytes: ByteBuffer)
    /// False while the transport's own buffer is above its high-water mark. The session then
    /// holds data frames back (control frames still go, so pings are answered) until told
    /// ``YamuxSession/transportWritable()``.
    var isWritable: Bool { get }
    /// Closes the transport; the peer sees EOF.
    func close()
}

extension YamuxTransport {
    public var isWritable: Bool { true }
}
