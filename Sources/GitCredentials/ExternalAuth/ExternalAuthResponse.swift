import AgentJSON

/// coderd's answer to `GET /api/v2/workspaceagents/me/external-auth`: a token (with the
/// username and password git should be given), or the URL the user must visit first.
public struct ExternalAuthResponse: Sendable, Equatable {
    public var accessToken = ""
    /// The provider's extra token properties; nil when coderd sent none (`null`).
    public var tokenExtra: JSONValue?
    public var url = ""
    public var type = ""
    /// RFC 3339 text as coderd sent it; Go's zero time when absent.
    public var expiresAt = "0001-01-01T00:00:00Z"
    public var username = ""
    public var password = ""

    public init() {}

    /// Decodes the body as Go's `encoding/json` would into the SDK's struct (keys matched
    /// case-insensitively, unknown keys and wrong kinds of optional fields ignored).
    public static func decode(_ body: [UInt8]) throws(ExternalAuthDecodeError) -> ExternalAuthResponse {
        let value: JSONValue
        do { value = try JSONValue.parseFirst(body) } catch { throw ExternalAuthDecodeError("decode external auth response: \(error.description)") }
        guard case .object = value else { throw ExternalAuthDecodeError("decode external auth response: not a JSON object") }
        var response = ExternalAuthResponse()
        func text(_ field: String) -> String? { value.goField(field)?.stringValue }
        response.accessToken = text("access_token") ?? ""
        if let extra = value.goField("token_extra"), case .object = extra { response.tokenExtra = extra }
        response.url = text("url") ?? ""
        response.type = text("type") ?? ""
        response.expiresAt = text("expires_at") ?? response.expiresAt
        response.username = text("username") ?? ""
        response.password = text("password") ?? ""
        return response
    }

    /// What git is told, one line: the password when the prompt named a user and there is
    /// one, else the username (the token itself for GitHub-style providers).
    public func askpassAnswer(promptUser: String) -> String {
        if !password.isEmpty { return promptUser.isEmpty ? username : password }
        return username
    }

    /// `coder external-auth access-token -o json`: the SDK struct, two-space indented, in
    /// its field order.
    public var indentedJSON: String {
        let fields: [(String, JSONValue)] = [
            ("access_token", .string(accessToken)),
            ("token_extra", tokenExtra ?? .null),
            ("url", .string(url)),
            ("type", .string(type)),
            ("expires_at", .string(expiresAt)),
            ("username", .string(username)),
            ("password", .string(password)),
        ]
        // The struct's order at the top; maps inside (token_extra) sorted as Go sorts them.
        return "{\n"
            + fields.map { "  " + jsonQuote($0.0, escapingHTML: true) + ": " + $0.1.indented("  ", prefix: "  ") }
            .joined(separator: ",\n") + "\n}"
    }
}

/// The body was not the object the SDK expects.
public struct ExternalAuthDecodeError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
