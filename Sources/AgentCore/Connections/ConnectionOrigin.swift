/// Where one HTTP connection came from: the listener that accepted it, or the module that
/// handed it over, and the peer's address when the connection itself cannot tell it (the
/// tailnet knows the tunnel peer's).
public struct ConnectionOrigin: Sendable, Equatable {
    /// ``ListenerName``: `"http"`, `"prometheus"`, `"tailnet"`.
    public var listener: String
    /// The peer's address as text, when the connection was handed over with one.
    public var remote: String?

    /// An origin named `listener` (a ``ListenerName``), with the peer's address if known.
    public init(listener: String, remote: String? = nil) {
        self.listener = listener
        self.remote = remote
    }

    /// A connection the HTTP API's own listener accepted.
    public static let http = ConnectionOrigin(listener: ListenerName.http)
}
