import AgentCore
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Logging
import Synchronization
import Testing
import Yamux

/// Agent API 2.11 against coderd's version check: the agent asks for 2.11 and, refused by
/// an older control plane, for 2.10 on the same dial.
@Suite(.timeLimit(.minutes(2)))
struct APIVersionTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The double answers as coderd's `apiversion.Validate` does.
    @Test func theDoubleChecksVersionsAsCoderd() {
        #expect(ControlPlaneDouble.versionError("2.10", server: "2.10") == nil)
        #expect(ControlPlaneDouble.versionError("2.0", server: "2.10") == nil)
        #expect(ControlPlaneDouble.versionError("2.11", server: "2.10") == "server is at version 2.10, behind requested minor version 2.11")
        #expect(ControlPlaneDouble.versionError("3.0", server: "2.11") == "server is at version 2.11, behind requested major version 3.0")
        #expect(ControlPlaneDouble.versionError("1.0", server: "2.11") == "version 1.0 is no longer supported")
        #expect(ControlPlaneDouble.versionError("2", server: "2.11") == "invalid version string: 2")
        #expect(ControlPlaneDouble.versionError("x.1", server: "2.11") == "invalid major version: x.1")
        #expect(ControlPlaneDouble.versionError("2.y", server: "2.11") == "invalid minor version: 2.y")
    }

    @Test func aRefusedVersionFallsBackOnTheSameDial() async throws {
        for (server, accepted, queries) in [
            ("2.11", AgentAPIVersion.v2_11, ["version=2.11&role=agent"]),
            ("2.10", AgentAPIVersion.v2_10, ["version=2.11&role=agent", "version=2.10&role=agent"]),
        ] {
            let double = ControlPlaneDouble(version: server)
            try await double.run { url in
                let dialer = WebSocketDialer(baseURL: url, token: double.token, version: "2.11", fallbackVersions: ["2.10"], logger: Self.quiet)
                let connection = try await dialer.connect()
                #expect(connection.version == accepted && connection.token == double.token)
                _ = try await AgentAPIClient(session: connection.session).getManifest()
                await connection.session.close()
                #expect(double.recorded.withLock { $0.queries } == queries)
                #expect(double.recorded.withLock { $0.refusals } == (queries.count == 2 ? [400] : []))
            }
        }
    }

    /// Without a version to fall back to, coderd's 400 is the dial's error; any other
    /// refusal is never answered with an older version.
    @Test func otherRefusalsAreNotRetriedWithAnOlderVersion() async throws {
        let double = ControlPlaneDouble(version: "2.10")
        try await double.run { url in
            await #expect(throws: DialError.refused(status: 400, message: "Unknown or unsupported API version")) {
                _ = try await WebSocketDialer(baseURL: url, token: double.token, version: "2.11", logger: Self.quiet).connect()
            }
            let wrongToken = WebSocketDialer(
                baseURL: url, token: "00000000-0000-4000-8000-000000000000", version: "2.11", fallbackVersions: ["2.10"], logger: Self.quiet)
            await #expect(throws: DialError.refused(status: 401, message: "Workspace agent not authorized.")) { _ = try await wrongToken.connect() }
            #expect(double.recorded.withLock { $0.queries } == ["version=2.11&role=agent", "version=2.11&role=agent"])
        }
    }
}
