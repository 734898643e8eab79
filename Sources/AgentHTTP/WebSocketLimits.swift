/// Bounds on what a WebSocket client may send, on every WebSocket route (enforced by
/// ``WebSocketMessageGuard`` before any route handler sees a frame).
public enum WebSocketLimits {
    /// Largest frame payload (NIO's frame decoder refuses larger frames with 1009).
    public static let maxFrameBytes = 1 << 20
    /// Largest message, all its fragments together; beyond it the connection is closed with
    /// 1009 (message too big). The largest a route collates (git watching's) is as large.
    public static let maxMessageBytes = 4 << 20
    /// Most frames one message may be split into; beyond it the connection is closed with
    /// 1009. A collated fragment costs about 100 bytes beyond its payload, so a flood of
    /// 1-byte fragments holds at most about 400 KiB per connection.
    public static let maxMessageFragments = 4096
}
