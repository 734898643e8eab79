/// The names of the places connections come from, as requests (`AgentRequestContext.listener`),
/// logs and metrics label them. Names come from the agent's code, never from clients, so a
/// metric labelled with one has a bounded number of series.
public enum ListenerName {
    /// The HTTP API's own listener (`--http-address`).
    public static let http = "http"
    /// The Prometheus listener (`--prometheus-address`).
    public static let prometheus = "prometheus"
    /// Connections the tailnet hands over (the agent's tunnel port 4).
    public static let tailnet = "tailnet"

    /// Longest name: 32 bytes.
    public static let maxBytes = 32
    /// Longest remote address text kept for a handed-over connection; longer text is cut.
    public static let maxRemoteBytes = 128

    /// 1 to ``maxBytes`` ASCII letters, digits, `-`, `_` or `.`: safe in a log line and a
    /// metric label as it is.
    public static func isValid(_ name: String) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maxBytes else { return false }
        return bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F || byte == 0x2E
        }
    }

    /// `remote` cut to ``maxRemoteBytes`` bytes (on a character boundary).
    public static func boundedRemote(_ remote: String?) -> String? {
        guard let remote, remote.utf8.count > maxRemoteBytes else { return remote }
        var cut = remote.utf8.index(remote.utf8.startIndex, offsetBy: maxRemoteBytes)
        while cut > remote.startIndex, remote.utf8[cut] & 0xC0 == 0x80 { cut = remote.utf8.index(before: cut) }
        return String(remote[..<cut])
    }
}
