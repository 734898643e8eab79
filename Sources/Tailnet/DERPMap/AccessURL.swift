/// The parts of the agent's access URL (`--agent-url`) the embedded-relay rewrite needs, parsed
/// as Go's `net/url` does for them: the scheme (lowercased), the host without brackets
/// (`URL.Hostname()`), and the port (explicit, else 443 for https and 80 otherwise).
public struct AccessURL: Sendable, Equatable {
    public let scheme: String
    public let host: String
    public let port: Int

    /// Nil when the text has no `scheme://host`.
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard !scheme.isEmpty else { return nil }
        var authority = text[text.index(colon, offsetBy: 3)...]
        if let end = authority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            authority = authority[..<end]
        }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var host: Substring
        var portText: Substring = ""
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            if rest.hasPrefix(":") { portText = rest.dropFirst() } else if !rest.isEmpty { return nil }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { return nil }
        var port = scheme == "https" ? 443 : 80
        if !portText.isEmpty {
            guard portText.utf8.count <= 5, let value = Int(portText), value <= 65535 else { return nil }
            port = value
        }
        self.scheme = scheme
        self.host = String(host)
        self.port = port
    }
}
