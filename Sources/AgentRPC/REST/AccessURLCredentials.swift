import FoundationEssentials

/// The user and password an access URL may carry (`https://user:pass@coder.example.com`),
/// taken out of it: Go's HTTP client sends them as Basic authorization (unless a header gives
/// one) and never prints them; the URL the agent dials, logs and names in errors has none.
struct AccessURLCredentials: Sendable, Equatable {
    /// The URL without its user and password (unchanged when it has none).
    let url: String
    /// `Basic <base64(user:password)>`, nil when the URL has no user.
    let authorization: String?

    init(_ text: String) {
        guard text.contains("@"), var components = URLComponents(string: text), let user = components.user else {
            url = text
            authorization = nil
            return
        }
        let pair = Array((user + ":" + (components.password ?? "")).utf8)
        authorization = "Basic " + Data(pair).base64EncodedString()
        components.user = nil
        components.password = nil
        url = components.string ?? text
    }

    /// `headers` with the Basic authorization added when there is one and no header names
    /// `Authorization` already (Go's order).
    func adding(to headers: [(String, String)]) -> [(String, String)] {
        guard let authorization, !headers.contains(where: { $0.0.lowercased() == "authorization" }) else { return headers }
        return headers + [("Authorization", authorization)]
    }
}
