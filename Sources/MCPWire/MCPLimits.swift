/// The bounds of the MCP client: what one server can make the agent hold or wait for.
public enum MCPLimits {
    /// The longest JSON-RPC message read from a server, in bytes (a tool result with images
    /// included). A longer line fails the session: the decoder never buffers more than this
    /// plus one read.
    public static let maxMessageBytes = 16 << 20
    /// Bytes queued for a server's stdin that it has not read yet; a send past it fails (the
    /// server is not reading).
    public static let maxPendingInputBytes = 32 << 20
    /// Lines a server may write to stdout that are not JSON-RPC before its session fails.
    public static let maxInvalidMessages = 1000
    /// Calls in flight on one server; the engine refuses more as busy (503 with `Retry-After`).
    public static let maxConcurrentCalls = 16
    /// `tools/list` pages followed for one listing.
    public static let maxListPages = 64
    /// Tools kept from one server; a listing with more fails.
    public static let maxTools = 1024
    /// One stderr line handed to the logger, in bytes; the rest of the line is cut.
    public static let maxStderrLineBytes = 4096
    /// Stderr lines logged in a burst, and refilled per second, per server; lines past it are
    /// counted and reported as dropped.
    public static let stderrBurstLines = 200
    public static let stderrLinesPerSecond = 20
    /// Notifications from a server buffered for the session's owner (list_changed events).
    public static let maxBufferedEvents = 16
}
