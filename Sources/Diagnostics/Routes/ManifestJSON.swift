import AgentCore

/// `GET /debug/manifest`: the manifest the agent holds, with the reference's JSON keys for
/// the fields it keeps (the agent keeps only what its modules use, not the whole message).
struct ManifestJSON: Encodable {
    struct Script: Encodable {
        var logSourceID: String
        var logPath: String
        var script: String
        var cron: String
        var runOnStart: Bool
        var runOnStop: Bool
        var startBlocksLogin: Bool
        var timeoutSeconds: Int64
        var displayName: String

        enum CodingKeys: String, CodingKey {
            case logSourceID = "log_source_id", logPath = "log_path", script, cron, runOnStart = "run_on_start"
            case runOnStop = "run_on_stop", startBlocksLogin = "start_blocks_login", timeoutSeconds = "timeout_seconds"
            case displayName = "display_name"
        }
    }

    struct Metadata: Encodable {
        var key: String
        var displayName: String
        var script: String
        var interval: Int64
        var timeout: Int64

        enum CodingKeys: String, CodingKey {
            case key, displayName = "display_name", script, interval, timeout
        }
    }

    struct App: Encodable {
        var id: String
        var slug: String
        var healthcheckURL: String

        enum CodingKeys: String, CodingKey {
            case id, slug, healthcheckURL = "healthcheck_url"
        }
    }

    var agentID: String
    var agentName: String
    var ownerName: String
    var workspaceID: String
    var workspaceName: String
    var directory: String
    var environmentVariables: [String: String]
    var derpForceWebSockets: Bool
    var disableDirectConnections: Bool
    var scripts: [Script]
    var metadata: [Metadata]
    var apps: [App]

    enum CodingKeys: String, CodingKey {
        case agentID = "agent_id", agentName = "agent_name", ownerName = "owner_name", workspaceID = "workspace_id"
        case workspaceName = "workspace_name", directory, environmentVariables = "environment_variables"
        case derpForceWebSockets = "derp_force_websockets", disableDirectConnections = "disable_direct_connections"
        case scripts, metadata, apps
    }

    init(_ manifest: AgentManifest) {
        agentID = Self.uuid(manifest.tailnet.agentID)
        agentName = manifest.agentName
        ownerName = manifest.ownerName
        workspaceID = Self.uuid(manifest.workspaceID)
        workspaceName = manifest.workspaceName
        directory = manifest.directory
        environmentVariables = manifest.environment
        derpForceWebSockets = manifest.tailnet.derpForceWebSockets
        disableDirectConnections = manifest.tailnet.disableDirectConnections
        scripts = manifest.scripts.map { script in
            Script(
                logSourceID: Self.uuid(script.logSourceID), logPath: script.logPath, script: script.script, cron: script.cron,
                runOnStart: script.runOnStart, runOnStop: script.runOnStop, startBlocksLogin: script.startBlocksLogin,
                timeoutSeconds: script.timeout.components.seconds, displayName: script.displayName)
        }
        metadata = manifest.metadata.map { item in
            Metadata(
                key: item.key, displayName: item.displayName, script: item.script,
                interval: item.interval.components.seconds, timeout: item.timeout.components.seconds)
        }
        apps = manifest.apps.map { App(id: Self.uuid($0.id), slug: $0.slug, healthcheckURL: $0.healthcheckURL) }
    }

    /// 16 bytes as UUID text; the nil UUID for anything else (Go prints a zero `uuid.UUID`).
    static func uuid(_ bytes: [UInt8]) -> String {
        let value = bytes.count == 16 ? bytes : [UInt8](repeating: 0, count: 16)
        var text = ""
        for (index, byte) in value.enumerated() {
            if [4, 6, 8, 10].contains(index) { text += "-" }
            text += zeroPadded(UInt32(byte), width: 2, radix: 16)
        }
        return text
    }
}
