import AgentCore
import AgentRPC
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The reference's agent authentication flags (`cli/root.go` `AgentAuth`) beside the control
/// plane's `--agent-url` and `--agent-token-file`: `--auth`, `--agent-token`, `--agent-name`.
struct AgentAuthOptions: ParsableArguments {
    @Option(name: .customLong("auth"), help: "How the agent authenticates: token (instance identity is not built yet). Env CODER_AGENT_AUTH. Default token.")
    var auth: String?

    @Option(name: .long, help: "The agent token (shown in the process list until the agent blanks it; prefer the variable or --agent-token-file). Env CODER_AGENT_TOKEN.")
    var agentToken: String?

    @Option(name: .long, help: "The agent to authenticate as, for instance identity. Env CODER_AGENT_NAME.")
    var agentName: String?

    /// `--auth`'s values, as the reference spells them.
    enum AuthType: String, CaseIterable, Sendable {
        case token
        case googleInstanceIdentity = "google-instance-identity"
        case awsInstanceIdentity = "aws-instance-identity"
        case azureInstanceIdentity = "azure-instance-identity"
    }

    /// A token file larger than this is refused (a token is 36 bytes).
    static let maxTokenFileBytes = 64 << 10

    struct Configuration: Sendable {
        var auth: AuthType = .token
        var agentName: String?
        /// The URL and token the control-plane session uses; both nil: standalone.
        var controlPlane = ControlPlaneOptions.Configuration()
    }

    /// The reference's rules in its order: the URL (`CODER_AGENT_URL must be set` when
    /// `urlRequired`, else standalone without one), the auth type, then the token: the flag or
    /// `CODER_AGENT_TOKEN`, else the file, read once and trimmed.
    func resolve(_ settings: Settings, controlPlane: ControlPlaneOptions, urlRequired: Bool) throws(ConfigurationError) -> Configuration {
        let name = try settings.string(agentName, flag: "--agent-name", variable: "CODER_AGENT_NAME")
        let url = settings.value(controlPlane.agentURL, flag: "--agent-url", variable: "CODER_AGENT_URL")
        if url == nil, urlRequired { throw ConfigurationError("CODER_AGENT_URL must be set") }
        let chosen = settings.value(auth, flag: "--auth", variable: "CODER_AGENT_AUTH")
        guard let type = AuthType(rawValue: chosen?.text ?? "token") else {
            throw ConfigurationError("unknown agent auth type: \(chosen?.text ?? "")")
        }
        guard url != nil else { return Configuration(auth: type, agentName: name) }
        guard type == .token else {
            throw ConfigurationError(
                "\(chosen?.source ?? "--auth"): \(type.rawValue) is not built into this agent yet; use token auth (CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE)")
        }
        let token: String
        if let given = settings.value(agentToken, flag: "--agent-token", variable: "CODER_AGENT_TOKEN") {
            token = given.text
        } else if let file = try settings.string(controlPlane.agentTokenFile, flag: "--agent-token-file", variable: "CODER_AGENT_TOKEN_FILE") {
            token = try Self.readTokenFile(file).trimmingWhitespace()
            if token.isEmpty { throw ConfigurationError("CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set for token auth") }
        } else {
            throw ConfigurationError("Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set")
        }
        // The control plane's own checks (the URL's form) on the token chosen here.
        var options = controlPlane
        options.agentTokenFile = nil
        var environment = settings.environment
        environment["CODER_AGENT_TOKEN_FILE"] = nil
        environment["CODER_AGENT_TOKEN"] = token
        let resolved = try options.resolve(Settings(environment: environment))
        return Configuration(auth: type, agentName: name, controlPlane: resolved)
    }

    /// The token file's text, at most ``maxTokenFileBytes`` (links followed, as the reference).
    static func readTokenFile(_ path: String) throws(ConfigurationError) -> String {
        func failure(_ reason: String) -> ConfigurationError {
            ConfigurationError("read token file \(goQuote(path)): \(reason)")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(SystemCallError.message(errno)) }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: maxTokenFileBytes + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { throw failure(SystemCallError.message(errno)) }
            if n == 0 { break }
            count += n
        }
        guard count <= maxTokenFileBytes else { throw failure("larger than \(maxTokenFileBytes >> 10) KiB") }
        return String(decoding: bytes[0..<count], as: UTF8.self)
    }
}
