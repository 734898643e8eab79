import AgentCore
import AgentProto
import AgentRPC
import Testing

/// Issue 8: the manifest reaches other modules as AgentCore's `AgentManifest`.
@Suite struct AgentManifestTests {
    @Test func variablesAndDirectoryAreExpandedInOrder() {
        var manifest = Coder_Agent_V2_Manifest()
        manifest.workspaceName = "ws"
        manifest.agentName = "main"
        manifest.ownerUsername = "alice"
        manifest.directory = "$HOME/project"
        manifest.environmentVariables = ["GREETING": "hi $CODER_WORKSPACE_OWNER_NAME"]
        let result = ControlPlaneSession.agentManifest(from: manifest, environment: ["HOME": "/home/alice"])
        #expect(result.directory == "/home/alice/project")
        #expect(result.environment["CODER"] == "true")
        #expect(result.environment["CODER_WORKSPACE_NAME"] == "ws")
        #expect(result.environment["CODER_WORKSPACE_AGENT_NAME"] == "main")
        #expect(result.environment["GREETING"] == "hi alice")
    }

    @Test func theStoreKeepsTheLatest() {
        let store = ManifestStore()
        #expect(store.currentManifest == nil)
        store.publish(AgentManifest(directory: "/a", environment: [:]))
        store.publish(AgentManifest(directory: "/b", environment: ["X": "1"]))
        #expect(store.currentManifest == AgentManifest(directory: "/b", environment: ["X": "1"]))
    }
}
