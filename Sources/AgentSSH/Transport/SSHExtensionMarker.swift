/// How the OpenSSH extensions swift-nio-ssh cannot parse travel inside it.
///
/// ``SSHMessageRewriter`` turns each such message, after decryption, into one swift-nio-ssh
/// knows (a `direct-tcpip` open, a `tcpip-forward` request, an `env` request) whose host or
/// name starts with a NUL byte and names the extension; outbound, the agent's marked
/// messages become the real ones before encryption. A NUL can never start a host or
/// variable name a client sends: the rewriter refuses such messages from clients.
enum SSHExtensionMarker {
    static let prefix = "\u{0}agent:"

    /// `direct-streamlocal@openssh.com` / `streamlocal-forward@openssh.com`: a Unix socket path.
    static func streamLocal(_ path: String) -> String { prefix + "streamlocal:" + path }
    /// A channel type the agent does not serve (the client learns it is unsupported).
    static func unsupported(_ type: String) -> String { prefix + "unsupported:" + type }
    /// A `keepalive@openssh.com` request (global or on a channel).
    static let keepalive = prefix + "keepalive"
    /// `x11-req` on a session channel; the value holds its fields.
    static let x11Request = prefix + "x11-req"
    /// `auth-agent-req@openssh.com` on a session channel.
    static let agentRequest = prefix + "auth-agent-req"
    /// The agent's `x11` channel to the client.
    static let x11Channel = prefix + "x11"
    /// The agent's `auth-agent@openssh.com` channel to the client.
    static let agentChannel = prefix + "auth-agent"

    /// The Unix socket path of a marked stream-local host, if it is one; nil also for a path
    /// holding a NUL (a C string would end there: a socket at another path), which is then
    /// refused as OpenSSH refuses it.
    static func streamLocalPath(_ host: String) -> String? {
        let head = streamLocal("")
        guard host.hasPrefix(head) else { return nil }
        let path = host.dropFirst(head.count)
        return path.utf8.contains(0) ? nil : String(path)
    }

    /// True when `text` is any marker (agent-made, never a client's).
    static func isMarked(_ text: String) -> Bool { text.hasPrefix("\u{0}") }
}

/// The fields of an `x11-req` (RFC 4254 §6.3.1), carried in a marked `env` value.
struct X11Request: Equatable, Sendable {
    var singleConnection: Bool
    var authProtocol: String
    var authCookie: String
    var screen: UInt32

    var encoded: String { "\(singleConnection ? 1 : 0) \(authProtocol) \(authCookie) \(screen)" }

    init(singleConnection: Bool, authProtocol: String, authCookie: String, screen: UInt32) {
        self.singleConnection = singleConnection
        self.authProtocol = authProtocol
        self.authCookie = authCookie
        self.screen = screen
    }

    /// Parses ``encoded``; nil for anything else (the protocol and cookie hold no spaces).
    init?(encoded: String) {
        let fields = encoded.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 4, let screen = UInt32(fields[3]), fields[0] == "0" || fields[0] == "1" else { return nil }
        self.init(singleConnection: fields[0] == "1", authProtocol: String(fields[1]), authCookie: String(fields[2]), screen: screen)
    }
}
