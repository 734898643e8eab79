import AgentHTTP
import Hummingbird
import Logging
import NIOCore
import Testing

/// The request-head deadline of test servers that are not about that deadline: a client
/// that writes from a test's task may wait for a cooperative thread between its connect and
/// its request, on a loaded host for longer than the agent's 10 s.
public let testServerHeadTimeout: Duration = .seconds(120)

/// Runs a real agent HTTP server with `mounts` on an ephemeral loopback port, hands `body`
/// the port, and stops the server afterwards. The request head may take `headTimeout`.
public func withAgentServer(
    _ mounts: [HTTPMount], headTimeout: Duration = testServerHeadTimeout, _ body: (Int) async throws -> Void
) async throws {
    let (ports, sink) = AsyncStream<Int>.makeStream()
    let app = AgentHTTPServer.makeApplication(
        address: BindTarget(kind: .tcp(host: "127.0.0.1", port: 0)), mounts: mounts, headTimeout: headTimeout,
        logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    ) { channel in
        sink.yield(channel.localAddress?.port ?? 0)
        sink.finish()
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        do {
            try await body(port)
        } catch {
            group.cancelAll()
            throw error
        }
        group.cancelAll()
    }
}
