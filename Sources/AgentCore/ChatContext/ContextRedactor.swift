
/// Scrubs secrets from every diagnostic that goes upward: each known secret value is
/// replaced with `[redacted]`, longest first, values under 4 bytes skipped (they would
/// mangle ordinary words), and the result is cut to 4096 bytes on a character boundary
/// with `... [truncated]`.
///
/// The secrets are the agent token and, for every `.mcp.json` entry, its `env` values, its
/// arguments that are not flags and the value of `--flag=value`, its header values and the
/// credential after a header's first space, and from its URL the userinfo, the password,
/// the raw query and each query value, and the path without its leading `/`.
public struct ContextRedactor: Sendable, Equatable {
    public static let placeholder = "[redacted]"
    /// Secrets shorter than this are not replaced.
    public static let minimumSecretBytes = 4
    /// coderd's cap on an error text.
    public static let maxTextBytes = 4096
    public static let truncatedSuffix = "... [truncated]"

    /// Longest first.
    public private(set) var secrets: [String]

    public init(secrets: [String] = []) {
        var unique = Set<String>()
        self.secrets = secrets
            .filter { $0.utf8.count >= Self.minimumSecretBytes && unique.insert($0).inserted }
            .sorted { $0.utf8.count != $1.utf8.count ? $0.utf8.count > $1.utf8.count : bytewisePrecedes($0, $1) }
    }

    /// With the secrets of `servers` added.
    public func adding(servers: [MCPServerConfig]) -> ContextRedactor {
        ContextRedactor(secrets: secrets + servers.flatMap(Self.secrets(of:)))
    }

    /// `text` with every secret replaced, cut to ``maxTextBytes``.
    public func scrub(_ text: String) -> String {
        var out = text
        for secret in secrets where out.contains(secret) {
            out = out.replacing(secret, with: Self.placeholder)
        }
        return Self.cut(out, bytes: Self.maxTextBytes)
    }

    /// At most `limit` bytes, cut on a character boundary; a cut text ends with
    /// `... [truncated]` (within the limit).
    public static func cut(_ text: String, bytes limit: Int, suffix: String = truncatedSuffix) -> String {
        guard text.utf8.count > limit else { return text }
        let room = max(0, limit - suffix.utf8.count)
        var used = 0
        var kept = ""
        for character in text {
            let size = character.utf8.count
            if used + size > room { break }
            kept.append(character)
            used += size
        }
        return kept + suffix
    }

    /// The values of one `.mcp.json` entry that may be secret.
    static func secrets(of server: MCPServerConfig) -> [String] {
        var out = Array(server.env.values)
        for argument in server.args {
            if argument.hasPrefix("-") {
                if let equals = argument.firstIndex(of: "=") { out.append(String(argument[argument.index(after: equals)...])) }
            } else {
                out.append(argument)
            }
        }
        for value in server.headers.values {
            out.append(value)
            if let space = value.firstIndex(of: " ") { out.append(String(value[value.index(after: space)...])) }
        }
        out += urlSecrets(server.url)
        return out
    }

    /// From `scheme://userinfo@host/path?query#fragment`: the userinfo, the password, the
    /// path without its `/`, the raw query and each query value.
    static func urlSecrets(_ url: String) -> [String] {
        guard let schemeEnd = url.firstRange(of: "://") else { return [] }
        var rest = Substring(url[schemeEnd.upperBound...])
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        var out: [String] = []
        var query: Substring = ""
        if let question = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: question)...]
            rest = rest[..<question]
        }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            out.append(String(userinfo))
            if let colon = userinfo.firstIndex(of: ":") { out.append(String(userinfo[userinfo.index(after: colon)...])) }
        }
        let path = rest[authorityEnd...].drop { $0 == "/" }
        if !path.isEmpty { out.append(String(path)) }
        if !query.isEmpty {
            out.append(String(query))
            for pair in query.split(separator: "&") {
                if let equals = pair.firstIndex(of: "=") { out.append(String(pair[pair.index(after: equals)...])) }
            }
        }
        return out
    }
}
