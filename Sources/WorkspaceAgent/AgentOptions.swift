import AgentCore
import AgentHTTP
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's own flags (state and metrics) and their environment twins; each module
/// declares its own flags in its options type.
struct AgentOptions: ParsableArguments {
    @Option(name: .long, help: "Directory for state that survives restarts. Env CODER_AGENT_STATE_DIR. Default: $XDG_STATE_HOME/workspace-agent.")
    var stateDir: String?

    @Option(name: .long, help: "Prometheus metrics listener: host:port, [v6]:port or unix:/path; empty disables; if it cannot be bound the agent warns and runs on. Env CODER_AGENT_PROMETHEUS_ADDRESS. Default \(AgentOptions.defaultPrometheusAddress).")
    var prometheusAddress: String?

    @Option(name: .long, help: "Reclaim start-up code pages 2 s after start (smaller idle RSS; code used again is read back once): true or false. Env CODER_AGENT_RELEASE_STARTUP_PAGES. Default true.")
    var releaseStartupPages: String?

    /// As the reference: Prometheus on loopback port 2112.
    static let defaultPrometheusAddress = "127.0.0.1:2112"

    struct Configuration {
        var stateDir: String
        /// nil when disabled.
        var prometheusAddress: BindTarget?
        var releaseStartupPages: Bool
    }

    func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let stateDir = try settings.string(stateDir, flag: "--state-dir", variable: "CODER_AGENT_STATE_DIR")
            ?? Self.defaultStateDir(settings.environment)
        let prometheus = try settings.parsed(
            prometheusAddress, flag: "--prometheus-address", variable: "CODER_AGENT_PROMETHEUS_ADDRESS", allowEmpty: true
        ) { text -> BindTarget? in text.isEmpty ? nil : try BindTarget(parsing: text) }
        // Unset: the default; set but empty: disabled.
        let address: BindTarget? = switch prometheus {
        case .none: try! BindTarget(parsing: Self.defaultPrometheusAddress)
        case .some(let chosen): chosen
        }
        let release = try settings.bool(
            releaseStartupPages, flag: "--release-startup-pages", variable: "CODER_AGENT_RELEASE_STARTUP_PAGES") ?? true
        return Configuration(stateDir: stateDir, prometheusAddress: address, releaseStartupPages: release)
    }

    static func defaultStateDir(_ env: [String: String]) -> String {
        if let xdg = env["XDG_STATE_HOME"], !xdg.isEmpty { return xdg + "/workspace-agent" }
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? String(temporaryDirectory().dropLast())
        return home + "/.local/state/workspace-agent"
    }
}

extension AgentOptions.Configuration {
    /// Creates the state directory (mode 0700) if it is missing.
    func prepareStateDirectory() throws(ConfigurationError) {
        do {
            try FileManager.default.createDirectory(
                atPath: stateDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ConfigurationError("--state-dir: cannot create \"\(stateDir)\": \(errorText(error))")
        }
    }
}
