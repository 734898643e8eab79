/// The clouds whose instance identity the agent can trade for a session token (`--auth`).
public enum InstanceIdentityCloud: String, Sendable, CaseIterable {
    case google
    case aws
    case azure

    /// The metadata service's address when nothing overrides it.
    public static let defaultMetadataHost = "169.254.169.254"

    /// The variable naming another metadata address (`host[:port]`, plain HTTP): Google's is
    /// its library's own; AWS's and Azure's are this agent's (the reference has none).
    public var metadataHostVariable: String {
        switch self {
        case .google: "GCE_METADATA_HOST"
        case .aws: "CODER_AGENT_AWS_METADATA_HOST"
        case .azure: "CODER_AGENT_AZURE_METADATA_HOST"
        }
    }

    /// coderd's route that takes this cloud's proof.
    public var exchangePath: String { "/api/v2/workspaceagents/\(rawValue)-instance-identity" }

    /// The metadata address from `environment`: the variable when set and not empty, else the default.
    public func metadataHost(_ environment: [String: String]) -> String {
        guard let value = environment[metadataHostVariable], !value.isEmpty else { return Self.defaultMetadataHost }
        return value
    }
}
