/// Scrubs secrets from every diagnostic that goes upward: each known secret value is
/// replaced with `[redacted]`, longest first, and the result is cut to 4096 bytes on a
/// character boundary with `... [truncated]`.
///
/// The secrets are the agent token (redacted in every text) and, per `.mcp.json` entry, the
/// fields that carry secrets, each as a whole value: its `env` values; its header values and
/// the credential after a header's first space (`Bearer <token>`); from its URL the userinfo,
/// the password, the raw query, each query value, and a path segment shaped like a token
/// (at least 16 bytes with a digit, as in `…/mcp/<key>/sse`); in its arguments the value of
/// a `--flag=value` and the argument after a flag whose name says it holds a secret
/// (`--token`, `--api-key`, …). Positional arguments, the command and the URL's other parts
/// are names, not secrets, and are kept.
///
/// Values under ``minimumSecretBytes`` (8) are not replaced: short values are words (`true`,
/// `exit`, `crash`) whose replacement mangles every text that contains them, and a credential
/// that short is not worth hiding at that price.
///
/// An entry's secrets redact that entry's texts only (``scrub(_:server:)``): what a server
/// prints or fails with comes from its own process or connection, which the agent handed
/// that entry's values and no other entry's. Texts of no one entry (a file that does not
/// parse, a push's snapshot error) get every entry's secrets (``scrub(_:)``).
public struct ContextRedactor: Sendable, Equatable {
    public static let placeholder = "[redacted]"
    /// Secrets shorter than this are not replaced.
    public static let minimumSecretBytes = 8
    /// coderd's cap on an error text.
    public static let maxTextBytes = 4096
    public static let truncatedSuffix = "... [truncated]"
    /// A URL path segment at least this long and with a digit is taken for a token.
    static let minimumPathTokenBytes = 16

    /// The secrets of every text (the agent token), longest first.
    public private(set) var secrets: [String]
    /// Each entry's own secrets, longest first, by server name.
    public private(set) var entrySecrets: [String: [String]] = [:]
    /// ``secrets`` and every entry's, longest first: for texts of no one entry.
    private var allSecrets: [String]

    public init(secrets: [String] = []) {
        self.secrets = Self.ordered(secrets)
        allSecrets = self.secrets
    }

    /// The most secrets an entry's texts are scrubbed of. Each line a server prints is
    /// searched for every one of them, so a `.mcp.json` entry of 70 000 `--x=value`
    /// arguments would cost 70 000 searches a line. The fields made for secrets (env values,
    /// headers, the URL's) come first, the longest of them; arguments fill what is left.
    public static let maxSecretsPerEntry = 256

    /// With the secrets of `servers` added, each to its own entry's texts.
    public func adding(servers: [MCPServerConfig]) -> ContextRedactor {
        var out = self
        for server in servers {
            let fields = Self.ordered((entrySecrets[server.name] ?? []) + Self.fieldSecrets(of: server)).prefix(Self.maxSecretsPerEntry)
            let arguments = Self.ordered(Self.argumentSecrets(of: server)).prefix(max(0, Self.maxSecretsPerEntry - fields.count))
            out.entrySecrets[server.name] = Self.ordered(Array(fields) + Array(arguments))
        }
        out.allSecrets = Self.ordered(secrets + out.entrySecrets.values.flatMap { $0 })
        return out
    }

    /// `text`, a text of no one entry, with the agent's and every entry's secrets replaced,
    /// cut to ``maxTextBytes``.
    public func scrub(_ text: String) -> String {
        Self.cut(Self.replacing(allSecrets, in: text), bytes: Self.maxTextBytes)
    }

    /// `text`, a text of the entry named `server` (its errors, its log lines), with the
    /// agent's and that entry's secrets replaced, cut to ``maxTextBytes``.
    public func scrub(_ text: String, server: String) -> String {
        var out = Self.replacing(entrySecrets[server] ?? [], in: text)
        out = Self.replacing(secrets, in: out)
        return Self.cut(out, bytes: Self.maxTextBytes)
    }

    /// Unique values of at least ``minimumSecretBytes``, longest first (so that a secret
    /// containing another is replaced whole), ties bytewise.
    static func ordered(_ values: [String]) -> [String] {
        var unique = Set<String>()
        return
            values
            .filter { $0.utf8.count >= Self.minimumSecretBytes && unique.insert($0).inserted }
            .sorted { $0.utf8.count != $1.utf8.count ? $0.utf8.count > $1.utf8.count : bytewisePrecedes($0, $1) }
    }

    static func replacing(_ secrets: [String], in text: String) -> String {
        var out = text
        for secret in secrets where out.contains(secret) {
            out = out.replacing(secret, with: Self.placeholder)
        }
        return out
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

    /// Words in a flag's name that say its value is a secret.
    static let secretFlagWords = ["token", "key", "secret", "password", "passwd", "auth", "credential", "bearer", "cookie"]

    /// The values of one `.mcp.json` entry that carry secrets (before the length filter).
    static func secrets(of server: MCPServerConfig) -> [String] {
        fieldSecrets(of: server) + argumentSecrets(of: server)
    }

    /// Its env values, headers (and a header's credential after its first space) and the
    /// URL's secrets: the fields made for secrets.
    static func fieldSecrets(of server: MCPServerConfig) -> [String] {
        var out = Array(server.env.values)
        for value in server.headers.values {
            out.append(value)
            if let space = value.firstIndex(of: " ") { out.append(String(value[value.index(after: space)...])) }
        }
        out += urlSecrets(server.url)
        return out
    }

    /// From its arguments: a `--flag=value`'s value, and the argument after a flag whose name
    /// says it holds a secret.
    static func argumentSecrets(of server: MCPServerConfig) -> [String] {
        var out: [String] = []
        var previousNamesSecret = false
        for argument in server.args {
            defer { previousNamesSecret = argument.hasPrefix("-") && !argument.contains("=") && isSecretFlag(argument) }
            if argument.hasPrefix("-"), let equals = argument.firstIndex(of: "=") {
                out.append(String(argument[argument.index(after: equals)...]))
            } else if previousNamesSecret, !argument.hasPrefix("-") {
                out.append(argument)
            }
        }
        return out
    }

    static func isSecretFlag(_ flag: String) -> Bool {
        let name = flag.lowercased()
        return secretFlagWords.contains { name.contains($0) }
    }

    /// From `scheme://userinfo@host/path?query#fragment`: the userinfo, the password, the
    /// raw query, each query value, and each path segment shaped like a token.
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
        for segment in rest[authorityEnd...].split(separator: "/")
        where segment.utf8.count >= minimumPathTokenBytes && segment.contains(where: \.isNumber) {
            out.append(String(segment))
        }
        if !query.isEmpty {
            out.append(String(query))
            for pair in query.split(separator: "&") {
                if let equals = pair.firstIndex(of: "=") { out.append(String(pair[pair.index(after: equals)...])) }
            }
        }
        return out
    }
}
