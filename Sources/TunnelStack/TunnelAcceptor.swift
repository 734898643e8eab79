import NIOCore

/// Serves the tunnel connections to one port: each accepted connection is a
/// ``TunnelChannel`` given to `initializer`, which sets up its pipeline (and may hand it on
/// to whatever serves it); the channel goes active, and reads start, once the returned
/// future succeeds. A failed future resets the connection.
public struct TunnelAcceptor: Sendable {
    /// Sets up one accepted channel's pipeline; called on the channel's event loop.
    public let initializer: @Sendable (any Channel) -> EventLoopFuture<Void>

    public init(_ initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) {
        self.initializer = initializer
    }
}

/// Why a ``TunnelStack`` could not start.
public struct TunnelStackError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
