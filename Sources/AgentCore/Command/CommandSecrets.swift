/// What every command gets that must never be shown: the session token and the user's
/// secrets' variables (manifest field 19, raw); every description names the variables only.
public struct CommandSecrets: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The control-plane session's token when the manifest was fetched (nil standalone).
    public var sessionToken: String?
    /// The secrets' variables by name, their values raw (never expanded).
    public var variables: [String: String]

    public init(sessionToken: String? = nil, variables: [String: String] = [:]) {
        self.sessionToken = sessionToken
        self.variables = variables
    }

    public var description: String {
        "CommandSecrets(token: \(sessionToken == nil ? "none" : "set"), variables: \(variables.keys.sorted()))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: ["variables": variables.keys.sorted()], displayStyle: .struct)
    }
}
