import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import BoundaryLogs

/// The whole path with real parts: boundary-style clients on the socket, the forwarder, the
/// real control-plane session, and the control-plane double, which starts only after the
/// logs were sent (an outage): every log arrives once, in order per session.
@Suite(.timeLimit(.minutes(3)))
struct BoundaryEndToEndTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func anOutageOfTheControlPlaneLosesNothing() async throws {
        let directory = NSTemporaryDirectory() + "boundary-e2e-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let double = ControlPlaneDouble()
        let port = freeLoopbackPort()
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = .seconds(3)
        let session = ControlPlaneSession(
            configuration: configuration,
            dialer: WebSocketDialer(baseURL: "http://127.0.0.1:\(port)", token: double.token, version: "2.10", logger: Self.quiet),
            logger: Self.quiet)
        let forwarder = BoundaryForwarder(
            upward: session, spool: BoundarySpool(directory: directory + "/spool", maxBytes: 64 << 20, logger: Self.quiet))
        let path = directory + "/audit.sock"
        let server = BoundarySocketServer(configuration: .init(path: path), forwarder: forwarder)
        let group = ServiceGroup(configuration: .init(services: [session, forwarder, server], logger: Self.quiet))
        let sessions = ["11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"]

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            #expect(await eventually { server.isListening })
            // 10 000 logs from two boundaries, interleaved, while no control plane answers.
            let clients = try sessions.map { _ in try #require(LoopbackSocket(unixPath: path)) }
            // Blocking sends (the server spools at its own pace): on a thread of their own.
            await onThread {
                for batch in 0..<500 {
                    for (client, session) in zip(clients, sessions) {
                        let urls = (0..<10).map { "https://\(session.prefix(4)).invalid/\(batch * 10 + $0)" }
                        client.send(Boundary.v2(Boundary.request(urls, session: session, firstSequence: Int32(batch * 10))))
                    }
                }
            }
            try await Task.sleep(for: .milliseconds(500))
            #expect(double.recorded.withLock { $0.boundaryLogs.isEmpty })

            try await double.run(port: port) { _ in
                #expect(
                    await eventually(timeout: .seconds(120)) {
                        double.recorded.withLock { $0.boundaryLogs.reduce(0) { $0 + $1.logs.count } } >= 10_000
                    })
                let requests = double.recorded.withLock { $0.boundaryLogs }
                for session in sessions {
                    let numbers = requests.filter { $0.sessionID == session }.flatMap { $0.logs.map(\.sequenceNumber) }
                    #expect(numbers == (0..<5000).map { Int32($0) }, "every log of \(session) once, in order")
                }
                #expect(requests.allSatisfy { $0.logs.count <= 1000 })
                await group.triggerGracefulShutdown()
            }
            try await tasks.waitForAll()
        }
    }
}
