import AgentCore
import AgentProto
import AgentRPC
import FoundationEssentials
import SwiftProtobuf
import Testing
import AgentTestSupport

/// The manifest reaches other modules as AgentCore's `AgentManifest`.
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

    /// A script whose log source id is not a UUID's 16 bytes is left out (the log writer
    /// traps on one); the others pass.
    @Test func aScriptWithAMalformedLogSourceIsLeftOut() {
        var manifest = Coder_Agent_V2_Manifest()
        var good = Coder_Agent_V2_WorkspaceAgentScript()
        good.logSourceID = Data([UInt8](repeating: 1, count: 16))
        good.displayName = "good"
        var bad = good
        bad.logSourceID = Data([1, 2, 3])
        bad.displayName = "bad"
        manifest.scripts = [good, bad]
        let result = ControlPlaneSession.agentManifest(from: manifest, environment: [:])
        #expect(result.scripts.map(\.displayName) == ["good"])
    }

    /// A health check's interval is whole seconds, as the reference reads it: below a second
    /// it is zero and the check is off. Before, a 1 ns interval became a loop of probes with
    /// no pause between them, one per app.
    @Test func aHealthCheckIntervalIsWholeSeconds() {
        var manifest = Coder_Agent_V2_Manifest()
        for (seconds, nanos) in [(0, 1), (0, 999_999_999), (2, 500_000_000), (-5, 0)] as [(Int64, Int32)] {
            var app = Coder_Agent_V2_WorkspaceApp()
            app.id = Data(repeating: UInt8(manifest.apps.count), count: 16)
            app.healthcheck.url = "http://127.0.0.1:1/"
            app.healthcheck.threshold = 1
            app.healthcheck.interval = .with {
                $0.seconds = seconds
                $0.nanos = nanos
            }
            manifest.apps.append(app)
        }
        let intervals = ControlPlaneSession.agentManifest(from: manifest, environment: [:]).apps.map(\.healthcheckInterval)
        #expect(intervals == [.zero, .zero, .seconds(2), .zero])
    }

    /// The tailnet's part: the agent id, the DERP map (serialized), and the DERP flags.
    @Test func tailnetFieldsArePassedOn() throws {
        var manifest = Coder_Agent_V2_Manifest()
        #expect(ControlPlaneSession.agentManifest(from: manifest, environment: [:]).tailnet == AgentManifest.Tailnet())
        manifest.agentID = Data([UInt8](repeating: 7, count: 16))
        manifest.derpForceWebsockets = true
        manifest.disableDirectConnections = true
        var region = Coder_Tailnet_V2_DERPMap.Region()
        region.regionID = 999
        manifest.derpMap.regions[999] = region
        let tailnet = ControlPlaneSession.agentManifest(from: manifest, environment: [:]).tailnet
        #expect(tailnet.agentID == [UInt8](repeating: 7, count: 16))
        #expect(tailnet.derpForceWebSockets && tailnet.disableDirectConnections)
        #expect(try Coder_Tailnet_V2_DERPMap(serializedBytes: tailnet.derpMap).regions[999]?.regionID == 999)
    }

    /// The byte-level expansion gives what the character walk gives, and hands names with
    /// non-ASCII letters to it.
    @Test func expansionCases() {
        let env = ["A": "1", "AB": "2", "HOME": "/h", "Ünï": "u", "A\u{301}": "acute", "_x9": "y"]
        let cases: [(String, String)] = [
            ("plain", "plain"), ("$A", "1"), ("${A}", "1"), ("$AB-$A", "2-1"), ("${AB}x", "2x"), ("$", "$"), ("a$", "a$"),
            ("$-x", "$-x"), ("${", "${"), ("${}", "${}"), ("$MISSING.", "."), ("${A", "1"), ("~/p", "/h/p"), ("$_x9$A", "y1"),
            ("é$A", "é1"), ("$Ünï", "u"), ("$A\u{301}", "acute"), ("x${Ünï}y", "xuy"), ("$1", ""),
        ]
        for (text, expected) in cases {
            #expect(ControlPlaneSession.expand(text, environment: env) == expected, "\(text)")
        }
        // The manifest's variables win over the environment, on both paths.
        let overrides = ["A": "9", "HOME": "/o", "Ünï": "v"]
        for (text, expected) in [("$A${AB}", "92"), ("~/p", "/o/p"), ("$Ünï$A", "v9"), ("$MISSING", "")] {
            #expect(ControlPlaneSession.expand(text, environment: env, overrides: overrides) == expected, "\(text)")
        }
    }

    @Test func theStoreKeepsTheLatest() {
        let store = ManifestStore()
        #expect(store.currentManifest == nil)
        store.publish(AgentManifest(directory: "/a", environment: [:]))
        store.publish(AgentManifest(directory: "/b", environment: ["X": "1"]))
        #expect(store.currentManifest == AgentManifest(directory: "/b", environment: ["X": "1"]))
    }
}

/// Manifest handling stays linear in the number of variables; this checks
/// the semantics the linear version must keep (a variable sees the agent's environment and
/// the manifest's variables already expanded, the latter winning).
@Suite struct AgentManifestExpansionTests {
    @Test(.ownThreads) func variablesSeeTheEnvironmentAndEarlierOnes() {
        var manifest = Coder_Agent_V2_Manifest()
        manifest.workspaceName = "ws"
        manifest.environmentVariables = ["GREETING": "hello $USER in $CODER_WORKSPACE_NAME"]
        for index in 0..<5000 { manifest.environmentVariables["V\(index)"] = "${HOME}/\(index)" }
        let result = ControlPlaneSession.agentManifest(from: manifest, environment: ["HOME": "/home/alice", "USER": "alice"])
        #expect(result.environment["GREETING"] == "hello alice in ws")
        #expect(result.environment["V4999"] == "/home/alice/4999")
        #expect(result.environment["CODER"] == "true")
    }
}
