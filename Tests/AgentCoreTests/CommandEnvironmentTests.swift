import AgentCore
import Testing

/// Every command's environment: the layers in the reference's precedence,
/// the secrets concealed from descriptions, and the session counts by name.
struct CommandEnvironmentTests {
    static func manifest() -> AgentManifest {
        var manifest = AgentManifest(
            directory: "/w",
            environment: [
                "CODER": "true", "CODER_WORKSPACE_NAME": "ws", "CODER_WORKSPACE_AGENT_NAME": "main", "CODER_WORKSPACE_OWNER_NAME": "alice",
                "CS_DISABLE_GETTING_STARTED_OVERRIDE": "from-manifest", "SHARED_MA": "from-manifest", "SHARED_MS": "from-manifest",
                "GIT_ASKPASS": "from-manifest", "PATH": "/manifest/bin",
            ],
            workspaceName: "ws", agentName: "main", ownerName: "alice")
        manifest.workspaceID = [0x0b, 0x7c, 0x6d, 0x5e, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1]
        manifest.vsCodePortProxyURI = "https://{{port}}--main--ws--alice.apps.example.com"
        manifest.commandSecrets = CommandSecrets(
            sessionToken: "the-token", variables: ["SHARED_MS": "from-secret $HOME", "GIT_ASKPASS": "from-secret"])
        return manifest
    }

    @Test func layersInTheReferencesPrecedence() {
        let command = CommandEnvironment(executable: "/opt/agent", binDirectory: "/data/bin")
        let base = [
            "CODER_WORKSPACE_NAME": "from-agent", "CODER_AGENT_TOKEN": "stale", "SHARED_MA": "from-agent", "AGENT_ONLY": "a",
            "HOME": "/home/u",
        ]
        let env = command.apply(to: base, manifest: Self.manifest())
        #expect(env["CODER"] == "true")
        #expect(env["CODER_WORKSPACE_NAME"] == "ws", "predefined beats the agent's own")
        #expect(env["CODER_WORKSPACE_AGENT_NAME"] == "main" && env["CODER_WORKSPACE_OWNER_NAME"] == "alice")
        #expect(env["CODER_WORKSPACE_ID"] == "0b7c6d5e-0000-4000-8000-000000000001")
        #expect(env["CODER_AGENT_TOKEN"] == "the-token", "the session's token beats an inherited one")
        #expect(env["GIT_SSH_COMMAND"] == "/opt/agent gitssh --")
        #expect(env["VSCODE_PROXY_URI"] == "https://{{port}}--main--ws--alice.apps.example.com")
        #expect(env["CS_DISABLE_GETTING_STARTED_OVERRIDE"] == "from-manifest", "the manifest overrides a predefined variable")
        #expect(env["AGENT_ONLY"] == "a" && env["HOME"] == "/home/u", "inherited where nothing is predefined")
        #expect(env["SHARED_MA"] == "from-manifest", "the manifest overrides the agent's own")
        #expect(env["SHARED_MS"] == "from-secret $HOME", "a secret overrides the manifest, unexpanded")
        #expect(env["GIT_ASKPASS"] == "/opt/agent", "the agent-level variable overrides both")
        #expect(env["PATH"] == "/data/bin:/manifest/bin", "the bin dir first, on the layers' PATH")
    }

    @Test func defaultsAndAbsences() {
        var manifest = AgentManifest(directory: "", environment: [:])
        let command = CommandEnvironment(executable: "/opt/agent")
        let bare = command.apply(to: ["PATH": "/usr/bin"], manifest: manifest)
        #expect(bare["VSCODE_PROXY_URI"] == nil && bare["CODER_AGENT_TOKEN"] == nil)
        #expect(bare["CS_DISABLE_GETTING_STARTED_OVERRIDE"] == "true")
        #expect(bare["CODER_WORKSPACE_ID"] == "00000000-0000-0000-0000-000000000000", "Go prints the zero UUID")
        #expect(bare["PATH"] == "/usr/bin", "no bin dir named: PATH as the layers give it")
        // Standalone (no manifest): the base alone.
        #expect(command.apply(to: ["A": "1"], manifest: nil) == ["A": "1"])
        // The scripts module names the bin dir; an empty PATH gets no trailing separator.
        command.setBinDirectory("/data/bin")
        manifest.environment = ["PATH": ""]
        #expect(command.apply(to: [:], manifest: manifest)["PATH"] == "/data/bin")
        #expect(command.apply(to: ["PATH": "/usr/bin"], manifest: AgentManifest(directory: "", environment: [:]))["PATH"] == "/data/bin:/usr/bin")
    }

    /// Hidden, the token reaches no command, nor the path of the agent's token file; the
    /// socket's path does. (The file's path was passed on, and the in-workspace commands read it.)
    @Test func aHiddenTokenLeavesNeitherTokenNorTokenFile() {
        let hidden = CommandEnvironment(executable: "/opt/agent", passesAgentToken: false, agentSocketPath: "/run/agent.sock")
        let base = ["CODER_AGENT_TOKEN_FILE": "/run/secrets/agent-token", "HOME": "/home/u"]
        let env = hidden.apply(to: base, manifest: Self.manifest())
        #expect(env["CODER_AGENT_TOKEN"] == nil && env["CODER_AGENT_TOKEN_FILE"] == nil, "\(env)")
        #expect(env["CODER_AGENT_SOCKET_PATH"] == "/run/agent.sock" && env["HOME"] == "/home/u")
        #expect(hidden.apply(to: base, manifest: nil) == ["HOME": "/home/u"], "standalone too")
        let shown = CommandEnvironment(executable: "/opt/agent")
        #expect(shown.apply(to: base, manifest: Self.manifest())["CODER_AGENT_TOKEN_FILE"] == "/run/secrets/agent-token")
        // A template naming a file of its own is heard.
        var manifest = Self.manifest()
        manifest.environment["CODER_AGENT_TOKEN_FILE"] = "/templates/own"
        #expect(hidden.apply(to: base, manifest: manifest)["CODER_AGENT_TOKEN_FILE"] == "/templates/own")
    }

    @Test func theAgentExecutableIsResolved() {
        let executable = CommandEnvironment.agentExecutable
        #expect(executable.hasPrefix("/") && executable == readSymbolicLink("/proc/self/exe"))
    }

    /// Descriptions of a manifest never carry the token or a secret's value.
    @Test func secretsAreConcealedFromDescriptions() {
        let manifest = Self.manifest()
        var dumped = ""
        dump(manifest, to: &dumped)
        for text in ["\(manifest)", String(describing: manifest), String(reflecting: manifest), dumped, "\(manifest.commandSecrets)"] {
            #expect(!text.contains("the-token") && !text.contains("from-secret"), "\(text)")
        }
        #expect("\(manifest.commandSecrets)".contains("SHARED_MS"), "the names are shown")
    }

    @Test func sessionCountsByNameAreBounded() {
        let counts = SessionCounts()
        counts.started(.ssh)
        let cursor = counts.started(named: SessionCounts.normalized("Cursor"))
        #expect(cursor == "cursor")
        counts.started(.reconnectingPTY)
        #expect(counts.snapshot() == ["ssh": 1, "cursor": 1, "reconnecting_pty": 1])
        var names: [String] = []
        for index in 0..<(SessionCounts.maxNames + 5) { names.append(counts.started(named: "ide_\(index)")) }
        #expect(counts.snapshot().count == SessionCounts.maxNames + 1, "past the cap: unknown")
        #expect(counts.snapshot()["unknown"] == 8)
        #expect(counts.started(named: "vscode") == "vscode", "a known name always has its own")
        for name in names { counts.ended(named: name) }
        counts.ended(named: cursor)
        counts.ended(.ssh)
        #expect(counts.snapshot() == ["reconnecting_pty": 1, "vscode": 1])
        #expect(counts.count(.vscode) == 1)
    }

    @Test func namesAreNormalizedAsCoderdStoresThem() {
        #expect(SessionCounts.normalized("VSCode-Insiders") == "vscode_insiders")
        #expect(SessionCounts.normalized("reconnecting-pty") == "reconnecting_pty")
        #expect(SessionCounts.normalized("\0\0") == "unknown")
        #expect(SessionCounts.normalized("\u{1B}\t") == "unknown", "control characters go")
        #expect(SessionCounts.normalized("JetBrains") == "jetbrains")
        // Any other name is kept as it was sent, case and dashes included.
        #expect(SessionCounts.normalized("MyIDE-Beta") == "MyIDE-Beta")
        #expect(SessionCounts.normalized("My\u{7}IDE") == "MyIDE")
        #expect(SessionCounts.normalized(String(repeating: "é", count: 100)) == String(repeating: "é", count: 64))
    }
}
