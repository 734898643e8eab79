import AgentCore
import AgentRPC
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// How an in-workspace command reaches coderd as the agent: `CODER_AGENT_URL` and the
/// agent's token (`CODER_AGENT_TOKEN`, which the agent gives every command it starts, or
/// `CODER_AGENT_TOKEN_FILE`), the flags of `coder agent` winning where a command has them.
enum AgentClientEnvironment {
    /// The REST client for `url` and `token` (flags) or the environment's; the reference's
    /// errors when either is missing.
    static func restClient(url flagURL: String? = nil, token flagToken: String? = nil, tokenFile flagTokenFile: String? = nil,
                           environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> CoderRESTClient {
        guard let url = nonEmpty(flagURL) ?? nonEmpty(environment["CODER_AGENT_URL"]) else {
            throw ConfigurationError("CODER_AGENT_URL must be set")
        }
        let auth = nonEmpty(environment["CODER_AGENT_AUTH"]) ?? "token"
        guard auth == "token" else {
            throw ConfigurationError("CODER_AGENT_AUTH=\(auth): in-workspace commands authenticate with the agent's token (CODER_AGENT_TOKEN)")
        }
        let token: String
        if let given = nonEmpty(flagToken) ?? nonEmpty(environment["CODER_AGENT_TOKEN"]) {
            token = given
        } else if let file = nonEmpty(flagTokenFile) ?? nonEmpty(environment["CODER_AGENT_TOKEN_FILE"]) {
            token = try AgentAuthOptions.readTokenFile(file).trimmingWhitespace()
        } else {
            throw ConfigurationError("Either CODER_AGENT_TOKEN or CODER_AGENT_TOKEN_FILE must be set")
        }
        return CoderRESTClient(baseURL: url, token: token)
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}
