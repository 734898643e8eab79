import AgentSystem
import NIOCore

/// Names looked up on a pool of the caller's, never on NIO's resolver, which runs each event
/// loop's lookups one after another on one queue: a name whose DNS never answers (a hostile
/// redirect, an MCP server's URL) held every later lookup on that loop, the control plane's
/// and the relays' dials among them, for as long as the resolver waited.
public enum NameLookup {
    /// Why a lookup gave no address.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// `host`'s addresses for `port` (the first of each family, in the resolver's order):
    /// itself when it is one, else a
    /// `getaddrinfo` on `pool` that the caller waits for until `deadline` (the lookup may go
    /// on after, its answer unused). Throws ``Failure`` (`timed out`, too many waiting, no
    /// such host).
    public static func addresses(_ host: String, port: Int, deadline: NIODeadline, pool: BlockingPool) async throws -> [SocketAddress] {
        if let address = try? SocketAddress(ipAddress: host, port: port) { return [address] }
        let found = try await withThrowingTaskGroup(of: [String]?.self) { group in
            group.addTask {
                do {
                    return try await pool.run { _ in HostLookup.orderedFirstAddresses(of: host, datagram: false) }
                } catch is BlockingPool.Overloaded {
                    throw Failure(description: "lookup \(host): too many lookups waiting")
                }
            }
            group.addTask {
                let left = deadline - .now()
                if left > .zero { try await Task.sleep(for: .nanoseconds(left.nanoseconds)) }
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let found else { throw Failure(description: "timed out") }
        let addresses = found.compactMap { try? SocketAddress(ipAddress: $0, port: port) }
        guard !addresses.isEmpty else { throw Failure(description: "lookup \(host): no such host") }
        return addresses
    }

    /// Connects to the first of `addresses` that takes the connection, each try with a
    /// bootstrap of its own.
    public static func connect<Output: Sendable>(
        to addresses: ArraySlice<SocketAddress>, _ connect: @escaping @Sendable (SocketAddress) -> EventLoopFuture<Output>
    ) -> EventLoopFuture<Output> {
        let future = connect(addresses.first!)
        guard addresses.count > 1 else { return future }
        let rest = addresses.dropFirst()
        return future.flatMapError { _ in Self.connect(to: rest, connect) }
    }
}
