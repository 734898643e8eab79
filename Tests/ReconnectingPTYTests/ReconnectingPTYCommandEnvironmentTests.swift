import AgentCore
import AgentTestSupport
import Foundation
import Logging
@testable import ReconnectingPTY
import Testing

/// The web terminal's command gets every command's layers.
@Suite(.timeLimit(.minutes(2)))
struct ReconnectingPTYCommandEnvironmentTests {
    @Test func aTerminalGetsTheTableInPrecedence() async throws {
        var manifest = AgentManifest(
            directory: "/", environment: ["CODER": "true", "CODER_WORKSPACE_NAME": "ws", "SHARED_MS": "manifest", "GIT_ASKPASS": "manifest"],
            workspaceName: "ws", agentName: "main", ownerName: "alice")
        manifest.commandSecrets = CommandSecrets(sessionToken: "tok-pty", variables: ["SHARED_MS": "secret"])
        let store = ManifestStore()
        store.publish(manifest)
        var environment = ProcessInfo.processInfo.environment
        environment["CODER_WORKSPACE_NAME"] = "from-agent"
        let server = ReconnectingPTYServer(
            manifest: store, environment: environment, command: CommandEnvironment(executable: "/opt/agent", binDirectory: "/data/bin"),
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let listener = try await LoopbackListener { channel in server.serve(channel) }
        defer {
            server.closeAll()
            Task { await listener.close() }
        }
        let socket = try #require(await LoopbackSocket.connect(port: listener.port))
        let command = #"printf 'got:%s|%s|%s|%s|%s:end\n' "$CODER_WORKSPACE_NAME" "$CODER_AGENT_TOKEN" "$SHARED_MS" "$GIT_ASKPASS" "${PATH%%:*}""#
        #expect(socket.send(PTYInit(id: UUID().uuidString, height: 24, width: 200, command: command, backendType: "buffered").frameBytes))
        let output = String(decoding: await socket.read(until: ":end"), as: UTF8.self)
        #expect(output.contains("got:ws|tok-pty|secret|/opt/agent|/data/bin:end"), "\(output)")
    }
}
