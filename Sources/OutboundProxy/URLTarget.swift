import FoundationEssentials

/// A URL's scheme (lowercased), host (without brackets), port and origin-form target; nil
/// without a scheme or host.
struct URLTarget {
    let scheme: String
    let host: String
    let port: Int?
    let pathAndQuery: String

    init?(_ url: String) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { return nil }
        self.scheme = scheme
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.port = components.port
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.pathAndQuery = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }
}
