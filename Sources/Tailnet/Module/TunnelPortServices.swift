import NIOCore
import Synchronization

/// What other modules serve on the tailnet's own ports besides the HTTP API on 4: the SSH
/// server on 1 and 22, the reconnecting PTY on 2 and the speed test on 3. The executable
/// registers each service; the tailnet serves a tunnel connection to a registered port by
/// handing its channel to the service, on the channel's loop before it is active.
///
/// Memory: one entry per registered port.
public final class TunnelPortServices: Sendable {
    /// Sets up a tunnel connection's channel; the future fails (and the channel is closed)
    /// when the service does not take it. `remote` is the peer's address as text.
    public typealias Serve = @Sendable (_ channel: any Channel, _ remote: String?) -> EventLoopFuture<Void>

    private let services = Mutex<[UInt16: Serve]>([:])

    public init() {}

    /// Serves `port` with `serve` (a later registration for the port replaces it).
    public func register(port: UInt16, _ serve: @escaping Serve) {
        services.withLock { $0[port] = serve }
    }

    /// Every registered port and its service.
    public var all: [UInt16: Serve] { services.withLock { $0 } }
}
