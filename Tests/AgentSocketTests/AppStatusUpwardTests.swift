import AgentCore
import AgentProto
import AgentRPC
import AgentSocket
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

/// UpdateAppStatus from the socket to the control plane, through the real session and the
/// control-plane double.
@Suite(.timeLimit(.minutes(3)))
struct AppStatusUpwardTests {
    static func status(_ slug: String, _ message: String, _ state: Coder_Agent_V2_UpdateAppStatusRequest.AppStatusState = .working) -> Coder_Agent_V2_UpdateAppStatusRequest {
        var request = Coder_Agent_V2_UpdateAppStatusRequest()
        request.slug = slug
        request.message = message
        request.state = state
        request.uri = "https://example.invalid/\(slug)"
        return request
    }

    @Test func queuedWhileDisconnectedThenDeliveredInOrder() async throws {
        // A control plane that is down: its port is known, nothing listens yet.
        let first = ControlPlaneDouble()
        let port = Mutex(0)
        try await first.run(port: freeLoopbackPort()) { url in port.withLock { $0 = Int(url.split(separator: ":").last!)! } }
        let url = "http://127.0.0.1:\(port.withLock { $0 })"
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = .seconds(3)
        let session = ControlPlaneSession(
            configuration: configuration,
            dialer: WebSocketDialer(baseURL: url, token: first.token, version: "2.10", logger: quiet), logger: quiet)
        let running = Task { try await session.run() }

        try await withSocketServer(upward: session) { client, _ in
            for step in 0..<3 {
                let queued = try await client.updateAppStatus(Self.status("app", "step \(step)", .idle))
                #expect(queued, "accepted and queued while the control plane is away")
            }
            // What the control plane would refuse is refused at once, with its text.
            do {
                _ = try await client.updateAppStatus(Self.status("app", String(repeating: "x", count: 161)))
                Issue.record("a 161-byte message was accepted")
            } catch {
                #expect("\(error)" == "Message is too long.")
            }
            // Beyond the reference: a slug or a URI past its bound is refused too, not logged
            // and sent upward whole.
            for (slug, uri, refusal) in [
                (String(repeating: "s", count: 257), "https://example.invalid/", "Slug is too long (at most 256 bytes)."),
                ("app", "https://example.invalid/" + String(repeating: "u", count: 8192), "URI is too long (at most 8192 bytes)."),
            ] {
                var request = Self.status(slug, "hi")
                request.uri = uri
                do {
                    _ = try await client.updateAppStatus(request)
                    Issue.record("accepted: \(refusal)")
                } catch {
                    #expect("\(error)" == refusal)
                }
            }

            let second = ControlPlaneDouble()
            try await second.run(port: port.withLock { $0 }) { _ in
                // The session may be in its longest reconnect wait (10 s ± 20 %) when the second double starts.
                #expect(await eventually(timeout: .seconds(30)) { second.recorded.withLock { $0.appStatuses.count } == 3 })
                let delivered = second.recorded.withLock { $0.appStatuses }
                #expect(delivered.map(\.message) == ["step 0", "step 1", "step 2"])
                #expect(delivered.allSatisfy { $0.slug == "app" && $0.state == .idle && $0.uri == "https://example.invalid/app" })

                // Connected: the call waits for the control plane, whose error reaches the caller.
                #expect(await eventually { session.isConnected })
                let queued = try await client.updateAppStatus(Self.status("app", "live", .complete))
                #expect(!queued)
                #expect(second.recorded.withLock { $0.appStatuses.last?.message } == "live")
                do {
                    _ = try await client.updateAppStatus(Self.status(ControlPlaneDouble.unknownAppSlug, "hi"))
                    Issue.record("an unknown app was accepted")
                } catch {
                    #expect("\(error)".contains("app not found"))
                }
                session.beginShutdown()
                try await running.value
            }
        }
    }
}
