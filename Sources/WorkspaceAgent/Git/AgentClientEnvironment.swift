import AgentCore
import AgentRPC
import AgentSocket
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// How an in-workspace command reaches coderd as the agent: `CODER_AGENT_URL` and the
/// agent's token (`CODER_AGENT_TOKEN`, which the agent gives every command it starts, or
/// `CODER_AGENT_TOKEN_FILE`), the flags of `coder agent` winning where a command has them.
/// Without a token (an agent run with `--hide-agent-token`), the agent that started the
/// command asks coderd for it, over its socket; under instance identity (`CODER_AGENT_AUTH`)
/// the command exchanges a token of its own.
enum AgentClientEnvironment {
    /// coderd for `url` and `token` (flags) or the environment's; else the agent socket when
    /// there is one; else the reference's errors.
    static func coderAPI(
        url flagURL: String? = nil, token flagToken: String? = nil, tokenFile flagTokenFile: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> any CoderRESTRequesting {
        let url = nonEmpty(flagURL) ?? nonEmpty(environment["CODER_AGENT_URL"])
        var token = nonEmpty(flagToken) ?? nonEmpty(environment["CODER_AGENT_TOKEN"])
        let tokenFile = nonEmpty(flagTokenFile) ?? nonEmpty(environment["CODER_AGENT_TOKEN_FILE"])
        if token == nil, tokenFile == nil {
            let socket = AgentSocketOptions.path(environment["CODER_AGENT_SOCKET_PATH"])
            if isAgentSocket(socket) { return AgentSocketCoderREST(client: AgentSocketClient(path: socket)) }
        }
        guard let url else { throw ConfigurationError("CODER_AGENT_URL must be set") }
        let auth = nonEmpty(environment["CODER_AGENT_AUTH"]) ?? "token"
        guard let type = AgentAuthOptions.AuthType(rawValue: auth) else {
            throw ConfigurationError("unknown agent auth type: \(auth)")
        }
        if let cloud = type.cloud {
            // As the reference's commands: their own exchange; CODER_AGENT_TOKEN is not used.
            let rest = CoderRESTClient(baseURL: url, token: nil)
            return ExchangingRESTClient(
                rest: rest,
                source: InstanceIdentityTokenSource(
                    cloud: cloud, metadataHost: cloud.metadataHost(environment), agentName: nonEmpty(environment["CODER_AGENT_NAME"]), rest: rest))
        }
        if token == nil, let tokenFile { token = try AgentAuthOptions.readTokenFile(tokenFile).trimmingWhitespace() }
        guard let token, !token.isEmpty else { throw ConfigurationError("Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set") }
        return CoderRESTClient(baseURL: url, token: token)
    }

    /// Whether a command can reach coderd at all: a token, or the agent socket.
    static func hasCredentials(token flagToken: String?, tokenFile flagTokenFile: String?, environment: [String: String]) -> Bool {
        if [flagToken, environment["CODER_AGENT_TOKEN"], flagTokenFile, environment["CODER_AGENT_TOKEN_FILE"]].contains(where: { nonEmpty($0) != nil }) {
            return true
        }
        return isAgentSocket(AgentSocketOptions.path(environment["CODER_AGENT_SOCKET_PATH"]))
    }

    /// A socket at `path` that this user or root owns (any, for root; the client checks its
    /// server too).
    static func isAgentSocket(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK && PeerProcess.mayOwnAgentSocket(uid: info.st_uid)
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}
