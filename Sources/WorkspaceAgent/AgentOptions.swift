import AgentCore
import AgentHTTP
import AgentProto
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's own flags (state, metrics, debug listeners, subsystems) and their environment
/// twins; each module declares its own flags in its options type.
struct AgentOptions: ParsableArguments {
    @Option(name: .long, help: "Directory for state that survives restarts. Env CODER_AGENT_STATE_DIR. Default: $XDG_STATE_HOME/workspace-agent.")
    var stateDir: String?

    @Option(name: .long, help: "Prometheus metrics listener: host:port, [v6]:port or unix:/path; empty disables; if it cannot be bound the agent warns and runs on. Env CODER_AGENT_PROMETHEUS_ADDRESS. Default \(AgentOptions.defaultPrometheusAddress).")
    var prometheusAddress: String?

    @Option(name: .long, help: "Reclaim start-up code pages 2 s after start (smaller idle RSS; code used again is read back once): true or false. Env CODER_AGENT_RELEASE_STARTUP_PAGES. Default true.")
    var releaseStartupPages: String?

    @Option(name: .long, help: "Debug listener (/debug/logs, /debug/manifest, /debug/magicsock): host:port, [v6]:port or unix:/path; empty disables; if it cannot be bound the agent warns and runs on. Env CODER_AGENT_DEBUG_ADDRESS. Default \(AgentOptions.defaultDebugAddress).")
    var debugAddress: String?

    @Option(name: .long, help: "Accepted as the reference's Go profiler address (host:port; empty disables); nothing listens here. Env CODER_AGENT_PPROF_ADDRESS. Default \(AgentOptions.defaultPprofAddress).")
    var pprofAddress: String?

    @Option(name: .long, help: "Keep the agent's token out of every command's environment (no CODER_AGENT_TOKEN); the in-workspace commands (git's askpass and gitssh, external-auth) then ask the agent over its socket: true or false. Env CODER_AGENT_HIDE_TOKEN. Default false.")
    var hideAgentToken: String?

    @Flag(name: .long, help: "Accepted as the reference's: do not fork a reaper as PID 1 (this agent never forks one: it reaps orphans itself as a child subreaper).")
    var noReap = false

    /// As the reference: Prometheus on loopback port 2112, the debug listener on 2113, pprof on 6060.
    static let defaultPrometheusAddress = "127.0.0.1:2112"
    static let defaultDebugAddress = "127.0.0.1:2113"
    static let defaultPprofAddress = "127.0.0.1:6060"

    /// `CODER_AGENT_SUBSYSTEM`'s accepted names (the reference's `codersdk.AgentSubsystem`).
    static let subsystemNames: [(String, Coder_Agent_V2_Startup.Subsystem)] = [
        ("envbox", .envbox), ("envbuilder", .envbuilder), ("exectrace", .exectrace),
    ]

    struct Configuration {
        var stateDir: String
        /// nil when disabled.
        var prometheusAddress: BindTarget?
        var releaseStartupPages: Bool
        /// nil when disabled.
        var debugAddress: BindTarget?
        /// Checked, never served: nil when disabled.
        var pprofAddress: BindTarget?
        var noReap = false
        /// No command gets `CODER_AGENT_TOKEN` (`--hide-agent-token`).
        var hideAgentToken = false
        /// `CODER_AGENT_SUBSYSTEM` in its order, for `Startup.subsystems`.
        var subsystems: [Coder_Agent_V2_Startup.Subsystem] = []
    }

    func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        let stateDir =
            try settings.string(stateDir, flag: "--state-dir", variable: "CODER_AGENT_STATE_DIR")
            ?? Self.defaultStateDir(settings.environment)
        let prometheus = try settings.parsed(
            prometheusAddress, flag: "--prometheus-address", variable: "CODER_AGENT_PROMETHEUS_ADDRESS", allowEmpty: true
        ) { text -> BindTarget? in text.isEmpty ? nil : try BindTarget(parsing: text, emptyHost: .allInterfaces) }
        // Unset: the default; set but empty: disabled.
        let address: BindTarget? =
            switch prometheus {
            case .none: try! BindTarget(parsing: Self.defaultPrometheusAddress)
            case .some(let chosen): chosen
            }
        let release =
            try settings.bool(
                releaseStartupPages, flag: "--release-startup-pages", variable: "CODER_AGENT_RELEASE_STARTUP_PAGES") ?? true
        return Configuration(
            stateDir: stateDir, prometheusAddress: address, releaseStartupPages: release,
            debugAddress: try Self.listener(settings, debugAddress, flag: "--debug-address", variable: "CODER_AGENT_DEBUG_ADDRESS", default: Self.defaultDebugAddress),
            pprofAddress: try Self.listener(settings, pprofAddress, flag: "--pprof-address", variable: "CODER_AGENT_PPROF_ADDRESS", default: Self.defaultPprofAddress),
            noReap: noReap,
            hideAgentToken: try settings.bool(hideAgentToken, flag: "--hide-agent-token", variable: "CODER_AGENT_HIDE_TOKEN") ?? false,
            subsystems: try Self.subsystems(settings.environment["CODER_AGENT_SUBSYSTEM"] ?? ""))
    }

    /// A listener address: unset is `fallback`, set but empty is nil (off).
    static func listener(
        _ settings: Settings, _ flagValue: String?, flag: String, variable: String, default fallback: String
    ) throws(ConfigurationError) -> BindTarget? {
        // The reference's listeners: an empty host is every interface, as Go reads it.
        let chosen = try settings.parsed(flagValue, flag: flag, variable: variable, allowEmpty: true) { text -> BindTarget? in
            text.isEmpty ? nil : try BindTarget(parsing: text, emptyHost: .allInterfaces)
        }
        return switch chosen {
        case .none: try! BindTarget(parsing: fallback)
        case .some(let target): target
        }
    }

    /// `CODER_AGENT_SUBSYSTEM` (env only, as the reference): a comma list, each entry trimmed,
    /// empty ones skipped; a name it does not know is `invalid subsystem "<x>"`.
    static func subsystems(_ text: String) throws(ConfigurationError) -> [Coder_Agent_V2_Startup.Subsystem] {
        var found: [Coder_Agent_V2_Startup.Subsystem] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = entry.trimmingWhitespace()
            if name.isEmpty { continue }
            guard let known = subsystemNames.first(where: { $0.0 == name }) else {
                throw ConfigurationError("invalid subsystem \(goQuote(name))")
            }
            found.append(known.1)
        }
        return found
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
