import Synchronization

/// What the control plane's manifest tells the other modules: the workspace directory, names,
/// variables and secrets, which every command gets through ``CommandEnvironment``.
public struct AgentManifest: Sendable, Equatable {
    /// Expanded (`~` and `$VAR`); may be empty.
    public var directory: String
    /// `CODER=true` and the three names, then the manifest's `environment_variables` (each
    /// expanded) over them; MCP servers and `/debug/manifest` see exactly this.
    public var environment: [String: String]
    public var workspaceName: String
    public var agentName: String
    public var ownerName: String
    /// What the tailnet needs of the manifest: the agent's UUID (16 bytes; its tunnel
    /// addresses), the DERP map as the serialized `coder.tailnet.v2.DERPMap` (empty when none;
    /// AgentCore carries no protobuf), and the two DERP policy flags.
    public var tailnet: Tailnet
    /// The workspace's UUID (16 bytes; empty when the manifest had none).
    public var workspaceID: [UInt8] = []
    /// The manifest's `coder_script`s, metadata keys and apps (the `Scripts` module runs
    /// and reports them).
    public var scripts: [ManifestScript] = []
    public var metadata: [ManifestMetadata] = []
    public var apps: [ManifestApp] = []
    /// The message-of-the-day file login shells with a terminal show (`motd_path`; may be
    /// empty or missing).
    public var motdFile: String = ""
    /// `vs_code_port_proxy_uri`: commands get it as `VSCODE_PROXY_URI` when it is not empty.
    public var vsCodePortProxyURI: String = ""
    /// The session token and the user's secrets' variables, concealed from every description.
    public var commandSecrets = CommandSecrets()
    /// `git_auth_configs`: how many git providers the deployment has (above zero, VS Code's
    /// git authentication is turned off so that its terminals use the agent's askpass).
    public var gitAuthConfigs = 0
    /// The control plane's access URL: commands get it as `CODER_AGENT_URL`, so that the
    /// in-workspace commands reach coderd also when the agent was given `--agent-url` alone.
    public var controlPlaneURL = ""

    public struct Tailnet: Sendable, Equatable {
        public var agentID: [UInt8]
        public var derpMap: [UInt8]
        public var derpForceWebSockets: Bool
        public var disableDirectConnections: Bool

        public init(
            agentID: [UInt8] = [], derpMap: [UInt8] = [], derpForceWebSockets: Bool = false,
            disableDirectConnections: Bool = false
        ) {
            self.agentID = agentID
            self.derpMap = derpMap
            self.derpForceWebSockets = derpForceWebSockets
            self.disableDirectConnections = disableDirectConnections
        }
    }

    public init(
        directory: String, environment: [String: String],
        workspaceName: String = "", agentName: String = "", ownerName: String = "", tailnet: Tailnet = Tailnet()
    ) {
        self.directory = directory
        self.environment = environment
        self.workspaceName = workspaceName
        self.agentName = agentName
        self.ownerName = ownerName
        self.tailnet = tailnet
    }
}

/// Where modules read the control plane's latest manifest.
public protocol ManifestSource: Sendable {
    /// The latest manifest; nil until the first arrives (forever when standalone).
    var currentManifest: AgentManifest? { get }
    /// The latest manifest with its publication's number (1 for the first, a new number for
    /// each publication), read together: a reader that saw a number has seen that manifest.
    var currentPublication: ManifestPublication? { get }
    /// The current manifest (if any) and then every new one. Buffers only the newest
    /// unread one; cancelling the consumer unsubscribes.
    func manifests() -> AsyncStream<AgentManifest>
}

/// A manifest and the number of its publication by the ``ManifestStore``.
public struct ManifestPublication: Sendable {
    public var manifest: AgentManifest
    /// Counts publications from 1; equal numbers from one source mean the same manifest.
    public var number: UInt64

    public init(manifest: AgentManifest, number: UInt64) {
        self.manifest = manifest
        self.number = number
    }
}

/// The latest manifest, published on every connection, observed by modules.
///
/// Memory: one manifest and at most ``maxSubscribers`` subscribers, each buffering one.
public final class ManifestStore: ManifestSource {
    /// Further subscriptions finish at once.
    public static let maxSubscribers = 64

    private struct State {
        var latest: AgentManifest?
        var publications: UInt64 = 0
    }
    private let state = Mutex(State())
    private let broadcast = LatestValueBroadcast<AgentManifest>(maxSubscribers: ManifestStore.maxSubscribers)

    public init() {}

    /// Stores `manifest` and tells every subscriber.
    public func publish(_ manifest: AgentManifest) {
        state.withLock { s in
            s.latest = manifest
            s.publications += 1
            // Under the lock: subscribers see the manifests in the order they were stored.
            broadcast.publish(manifest)
        }
    }

    public var currentManifest: AgentManifest? { state.withLock { $0.latest } }

    public var currentPublication: ManifestPublication? {
        state.withLock { s in s.latest.map { ManifestPublication(manifest: $0, number: s.publications) } }
    }

    /// The current manifest (when there is one), then each new one.
    public func manifests() -> AsyncStream<AgentManifest> { broadcast.subscribe() }

    /// Subscribers now.
    public var subscriberCount: Int { broadcast.subscriberCount }
}

/// Work on a manifest before it is published (before the first one starts the scripts):
/// `first` is true for the agent process's first manifest.
public typealias ManifestPreparation = @Sendable (_ manifest: AgentManifest, _ first: Bool) async -> Void
