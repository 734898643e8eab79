import AgentCore
import AgentTestSupport
@testable import ChatContext
import Testing

/// The connection's session token (under instance identity the only token the agent has,
/// exchanged anew) is redacted from what the context push sends, as the given token is.
struct SessionTokenRedactionTests {
    @Test func theManifestsSessionTokenIsRedacted() {
        let store = ManifestStore()
        let context = AgentContext(chatPaths: ChatPaths(), manifest: store, upward: NoUpward(), environment: [:], stateDirectory: "/nonexistent")
        let module = ChatContextModule(configuration: .init(), context: context, directory: nil, agentToken: nil)
        let exchanged = "5e5e5e5e-1111-4222-8333-444444444444"
        var manifest = AgentManifest(directory: "", environment: [:], workspaceName: "w", agentName: "a", ownerName: "o")
        manifest.commandSecrets = CommandSecrets(sessionToken: exchanged)
        store.publish(manifest)
        let scrubbed = module.redactor().scrub("server failed: token \(exchanged) refused")
        #expect(!scrubbed.contains(exchanged), "\(scrubbed)")
    }
}
