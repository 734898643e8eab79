import AgentJSON
import Foundation
import Synchronization

/// One external-auth provider as coderd is configured with it: its id, the regex a git
/// origin must match, and its type (`github`, `gitlab`, `bitbucket-cloud`, … which decides the
/// username and password git is given).
public struct DoubleExternalAuthProvider: Sendable {
    public var id: String
    public var regex: String
    public var type: String

    public init(id: String, regex: String, type: String = "github") {
        self.id = id
        self.regex = regex
        self.type = type
    }
}

/// The owner's side of coderd's external auth: the providers, the links the owner made
/// (token and extra properties), and the Coder git key.
public struct DoubleExternalAuth: Sendable {
    public var providers: [DoubleExternalAuthProvider] = []
    /// Provider id → (access token, `token_extra` JSON or nil).
    public var links: [String: (token: String, extra: String?)] = [:]
    /// The owner's git SSH key pair (`GET …/gitsshkey`); nil answers coderd's 500.
    public var gitSSHKey: (publicKey: String, privateKey: String)?
}

extension ControlPlaneDouble {
    public static let externalAuthPath = "/api/v2/workspaceagents/me/external-auth"
    public static let gitSSHKeyPath = "/api/v2/workspaceagents/me/gitsshkey"
    /// A `listen` request is answered within this at most (coderd holds it until the client
    /// goes; the double's loops are bounded).
    static let listenBound: Duration = .seconds(60)

    /// What the owner linked: a pending `listen` request answers once its provider is.
    public func linkExternalAuth(_ id: String, token: String, extra: String? = nil) {
        externalAuth.withLock { $0.links[id] = (token, extra) }
    }

    /// coderd's routes as the agent's helpers call them, registered when the double is made
    /// (a test's own `handleHTTP` for the same path replaces one).
    func registerCoderdRoutes() {
        for path in [Self.externalAuthPath, "/api/v2/workspaceagents/me/gitauth"] {
            handleHTTP("GET", path) { [self] request in
                if let denied = agentAuthorization(request) { return denied }
                return await externalAuthAnswer(request)
            }
        }
        handleHTTP("GET", Self.gitSSHKeyPath) { [self] request in
            if let denied = agentAuthorization(request) { return denied }
            guard let key = externalAuth.withLock({ $0.gitSSHKey }) else {
                return .error(500, "Internal error fetching git SSH key.")
            }
            let body = (try? JSONSerialization.data(withJSONObject: ["public_key": key.publicKey, "private_key": key.privateKey], options: [.sortedKeys])) ?? Data()
            return DoubleHTTPResponse(status: 200, body: .bytes(Array(body)))
        }
    }

    /// coderd's `workspaceAgentsExternalAuth`: the provider by id, else the last whose regex
    /// matches `match` (legacy `url`); no link yet: the URL to link at, or with `listen` a
    /// wait until the owner links.
    func externalAuthAnswer(_ request: DoubleHTTPRequest) async -> DoubleHTTPResponse {
        let match = request.queryValue("match").flatMap { $0.isEmpty ? nil : $0 } ?? request.queryValue("url") ?? ""
        let id = request.queryValue("id") ?? ""
        if match.isEmpty && id.isEmpty { return .error(400, "'url' or 'id' must be provided!") }
        if !match.isEmpty && !id.isEmpty { return .error(400, "'url' and 'id' cannot be provided together!") }
        let providers = externalAuth.withLock { $0.providers }
        var chosen: DoubleExternalAuthProvider?
        for provider in providers {
            if provider.id == id { chosen = provider; break }
            guard !match.isEmpty, match.range(of: provider.regex, options: .regularExpression) != nil else { continue }
            chosen = provider
        }
        guard let provider = chosen else {
            var detail = "External auth provider not found."
            if !providers.isEmpty {
                let regexes = providers.map { "\($0.id)=\(goQuote($0.regex))" }.joined(separator: ",")
                detail = "The configured external auth provider have regex filters that do not match the url. Provider url regex: \(regexes)"
            }
            return .error(404, "No matching external auth provider found in Coder for the url \(goQuote(match)).", detail: detail)
        }
        let listen = request.query.contains { $0.name == "listen" }
        var waited = Duration.zero
        while true {
            if let link = externalAuth.withLock({ $0.links[provider.id] }) {
                return Self.externalAuthResponse(provider, token: link.token, extra: link.extra)
            }
            guard listen, waited < Self.listenBound else {
                return .json(200, #"{"access_token":"","token_extra":null,"url":"\#(accessURL)/external-auth/\#(provider.id)","type":"","username":"","password":""}"#)
            }
            try? await Task.sleep(for: .milliseconds(50))
            waited += .milliseconds(50)
        }
    }

    /// coderd's `createExternalAuthResponse`: GitLab `oauth2` and Bitbucket `x-token-auth` as
    /// the username with the token as the password; every other type the token as the username.
    static func externalAuthResponse(_ provider: DoubleExternalAuthProvider, token: String, extra: String?) -> DoubleHTTPResponse {
        var username = token
        var password = ""
        switch provider.type {
        case "gitlab": (username, password) = ("oauth2", token)
        case "bitbucket-cloud", "bitbucket-server": (username, password) = ("x-token-auth", token)
        default: break
        }
        func quoted(_ text: String) -> String { jsonQuote(text, escapingHTML: true) }
        return .json(
            200,
            """
            {"access_token":\(quoted(token)),"token_extra":\(extra ?? "null"),"url":"","type":\(quoted(provider.type)),\
            "expires_at":"0001-01-01T00:00:00Z","username":\(quoted(username)),"password":\(quoted(password))}
            """)
    }
}
