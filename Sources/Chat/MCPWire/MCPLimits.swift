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
    /// Content items of one `tools/call` result passed on; a result with more fails the
    /// call. Mapping multiplies a result's smallest items: `0,` (two bytes of a message)
    /// becomes a text item naming an unsupported type (about 56 bytes of the answer, and
    /// more than 100 of memory), so a 16 MiB message would make 8 million items and an
    /// answer of some 450 MiB.
    public static let maxResultItems = 10_000
    /// One `tools/call` result's mapped content, counted as ``MCPContentItem/mappedBytes``
    /// (the UTF-8 of its strings and the JSON around them); a result past it fails the
    /// call. As large as a message, so that what fits in one (an image of nearly 16 MiB)
    /// is passed on.
    public static let maxResultBytes = maxMessageBytes

    /// Bytes buffered, queued and in flight for every server together (``MCPMemoryBudget``),
    /// charged as the capacity of the buffers that hold them: a server whose buffer would
    /// grow past it fails its session (or its send), and the others go on.
    public static let memoryBudgetBytes = 64 << 20
    /// Bytes a server may make the agent read (stdout, an HTTP answer or event stream): a
    /// burst of one whole message, then this many a second; past it the agent reads on
    /// when the bucket refills, so the server waits on a full pipe or TCP window.
    public static let inboundBytesPerSecond = 16 << 20
    /// Requests and notifications a server may send unasked (`ping`, `list_changed`, ...):
    /// a burst, then this many a second. Past it they are dropped unanswered (counted), and
    /// the agent reads on once a tenth of the burst has refilled.
    public static let unsolicitedBurst = 100
    public static let unsolicitedPerSecond = 20
    /// Stderr bytes read from a server a second (and the burst): past it the agent reads on
    /// when the bucket refills, so a flood costs the agent no more than this to read.
    public static let stderrBytesPerSecond = 1 << 20
    /// Bytes one HTTP exchange (the answer to one request: its JSON body or its event
    /// stream, comments and other events included) may make the agent read; past it the
    /// request fails.
    public static let maxExchangeBytes = 2 * maxMessageBytes
}
