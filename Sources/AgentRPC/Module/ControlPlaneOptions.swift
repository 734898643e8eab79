import AgentCore
import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The control-plane connection's flags and their environment twins.
public struct ControlPlaneOptions: ParsableArguments {
    @Option(name: .customLong("agent-url"), help: "Control plane access URL (http[s]://host). Env CODER_AGENT_URL. Default: none (standalone).")
    public var agentURL: String?

    @Option(name: .long, help: "File holding the agent token. Env CODER_AGENT_TOKEN_FILE; or the token itself in CODER_AGENT_TOKEN.")
    public var agentTokenFile: String?

    public init() {}

    /// The resolved settings: no URL runs standalone.
    public struct Configuration: Sendable {
        /// The control plane's access URL.
        public var url: String?
        /// The agent token (never logged); nil with instance identity (``tokenSource``).
        public var token: String?
        /// Where each dial's token comes from when it is not ``token`` (instance identity).
        public var tokenSource: (any SessionTokenSource)?
        /// Added to every request to the control plane (`--agent-header`; never logged).
        public var headers = AgentHeaders()

        public init(url: String? = nil, token: String? = nil) {
            self.url = url
            self.token = token
        }

        /// The token source the session dials with; nil runs standalone.
        public var sessionTokenSource: (any SessionTokenSource)? {
            guard url != nil else { return nil }
            return tokenSource ?? token.map { FixedSessionToken($0) }
        }

        /// A control plane is configured (the session dials it).
        public var connects: Bool { sessionTokenSource != nil }
    }

    /// `url` checked as the control plane's access URL: http(s) or ws(s) with a host.
    public static func checkedURL(_ url: Settings.Value) throws(ConfigurationError) -> String {
        let components = URLComponents(string: url.text)
        guard let scheme = components?.scheme?.lowercased(), ["http", "https", "ws", "wss"].contains(scheme),
            let host = components?.host, !host.isEmpty
        else {
            throw ConfigurationError("\(url.source): invalid URL \"\(url.text)\" (expected http(s)://host[:port])")
        }
        return url.text
    }

    public func resolve(_ settings: Settings) throws(ConfigurationError) -> Configuration {
        guard let url = settings.value(agentURL, flag: "--agent-url", variable: "CODER_AGENT_URL") else {
            return Configuration()
        }
        _ = try Self.checkedURL(url)
        var token: String?
        if let file = settings.value(agentTokenFile, flag: "--agent-token-file", variable: "CODER_AGENT_TOKEN_FILE") {
            guard let contents = try? String(contentsOfFile: file.text, encoding: .utf8) else {
                throw ConfigurationError("\(file.source): cannot read \"\(file.text)\"")
            }
            token = contents.trimmingWhitespace()
        } else if let value = settings.environment["CODER_AGENT_TOKEN"], !value.isEmpty {
            token = value
        }
        guard let token, !token.isEmpty else {
            throw ConfigurationError("\(url.source): an agent token is required (CODER_AGENT_TOKEN or --agent-token-file)")
        }
        return Configuration(url: url.text, token: token)
    }
}
