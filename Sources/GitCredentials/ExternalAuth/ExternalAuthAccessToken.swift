import AgentCore
import AgentJSON

/// `coder external-auth access-token <provider>`: the provider's token on stdout (no
/// newline), or the URL to authenticate at and exit status 1.
public enum ExternalAuthAccessToken {
    /// What the command prints on stdout, and whether it then exits 1 silently.
    public struct Output: Sendable, Equatable {
        public var text: String
        public var failed: Bool

        public init(text: String, failed: Bool) {
            self.text = text
            self.failed = failed
        }
    }

    public static func run(provider: String, extra: String, json: Bool, api: any CoderRESTRequesting) async throws(GitCredentialsFailure) -> Output {
        let token: ExternalAuthResponse
        switch try await ExternalAuthFetch.fetch(ExternalAuthQuery(id: provider), api: api, context: "get external auth token") {
        case .answer(let answer): token = answer
        case .refused(let response): throw .message("get external auth token: " + response.unexpectedStatusText)
        }
        return try output(token, extra: extra, json: json)
    }

    /// The reference's choice: JSON of the whole answer; else the URL (exit 1); else the
    /// `--extra` path's value; else the access token.
    public static func output(_ token: ExternalAuthResponse, extra: String, json: Bool) throws(GitCredentialsFailure) -> Output {
        if json { return Output(text: token.indentedJSON, failed: !token.url.isEmpty) }
        if !token.url.isEmpty { return Output(text: token.url, failed: true) }
        if !extra.isEmpty {
            guard let properties = token.tokenExtra else { throw .message("no extra properties found for token") }
            return Output(text: ExtraPath.lookup(extra, in: properties), failed: false)
        }
        return Output(text: token.accessToken, failed: false)
    }
}
