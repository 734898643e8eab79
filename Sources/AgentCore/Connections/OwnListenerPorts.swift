import Synchronization

/// The TCP ports the agent's own listeners (its HTTP API, the metrics listener) are bound to,
/// as bound: with port 0 the kernel's choice, known only once listening. The listening-ports
/// route leaves them out, as the reference leaves out its own.
///
/// Memory: one entry per listener the agent opens (a handful).
public final class OwnListenerPorts: Sendable {
    private let ports = Mutex<Set<UInt16>>([])

    public init(_ initial: Set<UInt16> = []) {
        ports.withLock { $0 = initial }
    }

    public func insert(_ port: UInt16) {
        _ = ports.withLock { $0.insert(port) }
    }

    /// Adds the port of a bound address as the host logs it (`127.0.0.1:2114`, `[::1]:2114`);
    /// `unix:/path` has none.
    public func insert(boundAddress: String) {
        guard !boundAddress.hasPrefix("unix:"), let colon = boundAddress.lastIndex(of: ":"),
            let port = UInt16(boundAddress[boundAddress.index(after: colon)...]), port != 0
        else { return }
        insert(port)
    }

    public var all: Set<UInt16> { ports.withLock { $0 } }
}
