import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import DRPC
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Yamux

#if canImport(Glibc)
import Glibc
#endif

/// The dialer against the double's real HTTP handling: coderd's refusals come back as
/// typed errors with the JSON message, and an accepted upgrade carries RPCs.
@Suite(.timeLimit(.minutes(3)))
struct WebSocketDialerTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    func dial(_ url: String, token: String, version: String = "2.10") async throws -> YamuxSession {
        try await WebSocketDialer(baseURL: url, token: token, version: version, logger: Self.quiet).dial()
    }

    @Test func refusalsCarryStatusAndMessage() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let cases: [(String, String, DialError)] = [
                ("", "2.10", .refused(status: 401, message: #"Cookie "coder_session_token" must be provided."#)),
                ("not-a-uuid", "2.10", .refused(status: 401, message: "Workspace agent token invalid.")),
                ("00000000-0000-4000-8000-000000000000", "2.10", .refused(status: 401, message: "Workspace agent not authorized.")),
                (double.token, "3.0", .refused(status: 400, message: "Unknown or unsupported API version")),
            ]
            for (token, version, expected) in cases {
                await #expect(throws: expected) { _ = try await dial(url, token: token, version: version) }
            }
            double.refuseWith.withLock { $0 = 503 }
            await #expect(throws: DialError.refused(status: 503, message: "Internal error.")) {
                _ = try await dial(url, token: double.token)
            }
            double.refuseWith.withLock { $0 = nil }
            #expect(double.recorded.withLock { $0.refusals } == [401, 401, 401, 400, 503])
            #expect(double.recorded.withLock { $0.connections } == 0)
        }
    }

    @Test func acceptedUpgradeCarriesCalls() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = try await dial(url, token: double.token)
            let api = AgentAPIClient(session: session)
            let manifest = try await api.getManifest()
            #expect(manifest.agentName == "main")
            // Many calls at once, each on its own stream.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<50 {
                    group.addTask {
                        var status = Coder_Agent_V2_UpdateAppStatusRequest()
                        status.slug = "app\(i)"
                        try await api.updateAppStatus(status)
                    }
                }
                try await group.waitForAll()
            }
            #expect(double.recorded.withLock { $0.appStatuses.count } == 50)
            // Finished calls leave no stream state behind once both FINs crossed.
            #expect(await eventually(timeout: .seconds(30)) { await session.streamCount == 0 })
            await session.close()
        }
    }

    @Test func dialsOverIPv6Loopback() async throws {
        let double = ControlPlaneDouble()
        try await double.run(host: "::1") { url in
            #expect(url.hasPrefix("http://[::1]:"))
            let session = try await dial(url, token: double.token)
            #expect(try await AgentAPIClient(session: session).getManifest().agentName == "main")
            await session.close()
        }
    }

    @Test func unknownMethodIsUnsupportedAndTheSessionStaysUp() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = try await dial(url, token: double.token)
            let api = AgentAPIClient(session: session)
            do {
                // The double, like an older coderd, does not serve this one.
                _ = try await api.call("GetServiceBanner", Coder_Agent_V2_GetManifestRequest(), returning: Coder_Agent_V2_GetManifestRequest.self)
                Issue.record("expected an error")
            } catch let error as DRPCCallError {
                #expect(error.isUnsupported)
            }
            #expect(try await api.getManifest().agentName == "main")
            await session.close()
        }
    }

    /// On a live session: a message over 4 MiB either way fails only its own
    /// call (its yamux stream is reset); the session keeps serving.
    @Test func oversizedMessagesFailOnlyTheirStream() async throws {
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.motdPath = String(repeating: "m", count: 4 << 20)
        let double = ControlPlaneDouble(manifest: manifest)
        try await double.run { url in
            let session = try await dial(url, token: double.token)
            let api = AgentAPIClient(session: session)
            // Downward: the reply is larger than 4 MiB.
            await #expect(throws: DRPCCallError.wire(.dataOverflow(limit: 4 << 20))) { _ = try await api.getManifest() }
            // Upward: the request is larger than 4 MiB; the double refuses that stream.
            var big = Coder_Agent_V2_ReportBoundaryLogsRequest()
            big.sessionID = String(repeating: "s", count: (4 << 20) + 1)
            await #expect(throws: (any Error).self) { try await api.reportBoundaryLogs(big) }
            #expect(double.recorded.withLock { $0.boundaryLogs.isEmpty })
            // The session is still up for everything else.
            var lifecycle = Coder_Agent_V2_Lifecycle()
            lifecycle.state = .ready
            #expect(try await api.updateLifecycle(lifecycle).state == .ready)
            #expect(await session.closeReason == nil)
            await session.close()
        }
    }

    /// A cancelled call ends at once, even while the control plane stalls, and leaves the
    /// session usable.
    @Test func cancellingACallResetsItsStream() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = try await dial(url, token: double.token)
            let api = AgentAPIClient(session: session)
            double.answerDelay.withLock { $0 = .seconds(3600) }
            let stalled = Task {
                var lifecycle = Coder_Agent_V2_Lifecycle()
                lifecycle.state = .ready
                return try await api.updateLifecycle(lifecycle)
            }
            try await Task.sleep(for: .milliseconds(100))
            stalled.cancel()
            await #expect(throws: (any Error).self) { _ = try await stalled.value }
            double.answerDelay.withLock { $0 = .zero }
            #expect(try await api.getManifest().agentName == "main")
            #expect(await session.closeReason == nil)
            await session.close()
        }
    }

    /// Also when the double drops the connection before its side of the session is made
    /// (its event loop between writing the 101 and making the session; a busy host's CI
    /// run hung here for good: nothing was dropped).
    @Test(arguments: [0, 1000]) func aDroppedConnectionEndsTheSession(setupDelayMs: Int64) async throws {
        let double = ControlPlaneDouble()
        double.sessionSetupDelay.withLock { $0 = .milliseconds(setupDelayMs) }
        try await double.run { url in
            let session = try await dial(url, token: double.token)
            await double.dropConnections()
            // Bounded: a session that stays up fails the test instead of holding the run.
            #expect(await eventually(timeout: .seconds(60)) { await session.closeReason != nil })
            #expect(await session.closeReason == .sessionClosed)
            await #expect(throws: (any Error).self) { _ = try await AgentAPIClient(session: session).getManifest() }
        }
    }

    /// A server that accepts the connection and never answers the upgrade cannot hold the
    /// dial past its deadline (2 s: with 300 ms, a loaded run's loopback connect alone took
    /// longer and failed first).
    @Test func silentServerTimesOut() async throws {
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        await #expect(throws: DialError.timedOut) {
            _ = try await WebSocketConnector.connect(url: "ws://127.0.0.1:\(port)/x", timeout: .seconds(2)) { _ in 0 }
        }
        try await silent.close()
    }

    /// A server whose `101` the upgrader refuses (a wrong accept key, a wrong `Upgrade`)
    /// fails the dial and its connection is closed. Before, the connection stayed open and
    /// reading: a socket kept per dial, and whatever the server sent next buffered by the HTTP
    /// decoder until the agent trapped at 4 GiB.
    @Test(arguments: [
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
    ])
    func aRefusedUpgradeClosesItsConnection(answer: String) async throws {
        // Non-blocking: the test waits in sleeps, never holding one of the few pool threads
        // the dial needs.
        let (listener, port) = try #require(RawLoopbackListener.make(backlog: 4, nonBlocking: true))
        defer { close(listener) }
        let dial = Task {
            try await WebSocketConnector.connect(url: "ws://127.0.0.1:\(port)/x", timeout: .seconds(60)) { _ in 0 }
        }
        var accepted: Int32 = -1
        var deadline = PollDeadline(.seconds(60))
        while accepted < 0, !deadline.hasPassed {
            accepted = accept(listener, nil, nil)
            if accepted < 0 { await deadline.sleep(.milliseconds(5)) }
        }
        try #require(accepted >= 0, "the dial connected")
        _ = fcntl(accepted, F_SETFD, FD_CLOEXEC)
        _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) & ~O_NONBLOCK)
        let server = LoopbackSocket(descriptor: accepted)
        let request = await server.read(until: "\r\n\r\n", timeout: .seconds(60))
        #expect(String(decoding: request, as: UTF8.self).hasPrefix("GET /x HTTP/1.1"))
        #expect(server.send(answer))
        // What a server sends next: the agent may have closed already (a reset then fails it).
        _ = server.send(String(repeating: "x", count: 64 << 10))
        await #expect(throws: (any Error).self) { _ = try await dial.value }
        #expect(await server.isClosedByPeer(within: .seconds(20)), "the agent closed the refused connection")
    }

    @Test func nothingListeningFailsTheDial() async throws {
        await #expect(throws: (any Error).self) {
            _ = try await dial("http://127.0.0.1:1", token: "8b6c4a52-9f0e-4d7b-a2c1-1e2f3a4b5c6d")
        }
    }
}
