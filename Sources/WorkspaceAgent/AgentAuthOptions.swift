import AgentCore
import AgentRPC
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The reference's agent authentication flags (`cli/root.go` `AgentAuth`) beside the control
/// plane's `--agent-url` and `--agent-token-file`: `--auth`, `--agent-token`, `--agent-name`,
/// and the extra headers of `coder agent` (`--agent-header`, `--agent-header-command`).
struct AgentAuthOptions: ParsableArguments {
    @Option(name: .customLong("auth"), help: "How the agent authenticates: token, google-instance-identity, aws-instance-identity or azure-instance-identity (a token exchanged for the cloud's identity before every connection). Env CODER_AGENT_AUTH. Default token.")
    var auth: String?

    @Option(name: .long, help: "The agent token (shown in the process list until the agent blanks it; prefer the variable or --agent-token-file). Env CODER_AGENT_TOKEN.")
    var agentToken: String?

    @Option(name: .long, help: "The agent to authenticate as, for instance identity. Env CODER_AGENT_NAME.")
    var agentName: String?

    @Option(name: .long, help: "An HTTP header key=value added to every request to the control plane; repeatable. Env CODER_AGENT_HEADER (comma-separated).")
    var agentHeader: [String] = []

    @Option(name: .long, help: "A command run once at start (sh -c, with CODER_URL) whose output lines key=value are headers added to every request to the control plane. Env CODER_AGENT_HEADER_COMMAND.")
    var agentHeaderCommand: String?

    /// `--auth`'s values, as the reference spells them.
    enum AuthType: String, CaseIterable, Sendable {
        case token
        case googleInstanceIdentity = "google-instance-identity"
        case awsInstanceIdentity = "aws-instance-identity"
        case azureInstanceIdentity = "azure-instance-identity"

        /// The cloud whose identity is exchanged; nil for a token.
        var cloud: InstanceIdentityCloud? {
            switch self {
            case .token: nil
            case .googleInstanceIdentity: .google
            case .awsInstanceIdentity: .aws
            case .azureInstanceIdentity: .azure
            }
        }
    }

    /// A token file larger than this is refused (a token is 36 bytes).
    static let maxTokenFileBytes = 64 << 10

    struct Configuration: Sendable {
        var auth: AuthType = .token
        var agentName: String?
        /// The URL and token the control-plane session uses; no URL: standalone.
        var controlPlane = ControlPlaneOptions.Configuration()

        /// `headers` added to every request, and for instance identity the exchange each dial
        /// asks for its token (the metadata address from `environment`).
        func connecting(headers: AgentHeaders, environment: [String: String]) -> Configuration {
            var result = self
            result.controlPlane.headers = headers
            guard let url = controlPlane.url, let cloud = auth.cloud else { return result }
            result.controlPlane.tokenSource = InstanceIdentityTokenSource(
                cloud: cloud, metadataHost: cloud.metadataHost(environment), agentName: agentName,
                rest: CoderRESTClient(baseURL: url, token: nil, headers: headers.pairs))
            return result
        }
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
        guard let url else { return Configuration(auth: type, agentName: name) }
        guard type == .token else {
            // The token comes from the exchange before each connection.
            return Configuration(
                auth: type, agentName: name, controlPlane: ControlPlaneOptions.Configuration(url: try ControlPlaneOptions.checkedURL(url)))
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

    /// The extra headers: `--agent-header` (else `CODER_AGENT_HEADER`, comma-separated), then
    /// the lines of `--agent-header-command` (else `CODER_AGENT_HEADER_COMMAND`), run once
    /// now; any failure is `configure header transport: …`, as the reference exits with.
    func headers(_ settings: Settings, url: String) throws(ConfigurationError) -> AgentHeaders {
        var entries = agentHeader
        if entries.isEmpty, let variable = settings.environment["CODER_AGENT_HEADER"] {
            entries = AgentHeaders.environmentList(variable)
        }
        do {
            if let command = settings.value(agentHeaderCommand, flag: "--agent-header-command", variable: "CODER_AGENT_HEADER_COMMAND") {
                entries += try AgentHeaderCommand.run(command.text, environment: settings.environment, url: url)
            }
            return try AgentHeaders.parse(entries)
        } catch let error as AgentHeaders.ParseError {
            throw ConfigurationError("configure header transport: \(error.description)")
        } catch let error as AgentHeaderCommand.Failure {
            throw ConfigurationError("configure header transport: \(error.description)")
        } catch {
            throw ConfigurationError("configure header transport: \(error)")
        }
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
