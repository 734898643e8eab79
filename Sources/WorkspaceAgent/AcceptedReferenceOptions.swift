import AgentCore
import ArgumentParser

/// Flags of the reference's `coder agent` that this agent accepts and checks but does not act
/// on yet, so that a template's command line or environment works unchanged.
struct AcceptedReferenceOptions: ParsableArguments {
    @Option(name: .long, help: "Accepted (true or false): dev containers are not supported; the containers routes answer 403. Env CODER_AGENT_DEVCONTAINERS_ENABLE. Default true.")
    var devcontainersEnable: String?

    @Option(name: .long, help: "Accepted (true or false), as --devcontainers-enable. Env CODER_AGENT_DEVCONTAINERS_PROJECT_DISCOVERY_ENABLE. Default true.")
    var devcontainersProjectDiscoveryEnable: String?

    @Option(name: .long, help: "Accepted (true or false), as --devcontainers-enable. Env CODER_AGENT_DEVCONTAINERS_DISCOVERY_AUTOSTART_ENABLE. Default false.")
    var devcontainersDiscoveryAutostartEnable: String?

    /// The checked values, for the capabilities that will use them.
    struct Configuration: Sendable, Equatable {
        var devcontainers = true
        var devcontainerProjectDiscovery = true
        var devcontainerDiscoveryAutostart = false
    }

    func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        Configuration(
            devcontainers: try settings.bool(devcontainersEnable, flag: "--devcontainers-enable", variable: "CODER_AGENT_DEVCONTAINERS_ENABLE") ?? true,
            devcontainerProjectDiscovery: try settings.bool(
                devcontainersProjectDiscoveryEnable, flag: "--devcontainers-project-discovery-enable",
                variable: "CODER_AGENT_DEVCONTAINERS_PROJECT_DISCOVERY_ENABLE") ?? true,
            devcontainerDiscoveryAutostart: try settings.bool(
                devcontainersDiscoveryAutostartEnable, flag: "--devcontainers-discovery-autostart-enable",
                variable: "CODER_AGENT_DEVCONTAINERS_DISCOVERY_AUTOSTART_ENABLE") ?? false)
    }
}
