/// A SOCKS5 proxy's connect (RFC 1928), with username and password (RFC 1929) when the proxy
/// URL has a user, as Go's SOCKS client does it: offer "no authentication" (and, with
/// credentials, username/password), authenticate if the proxy chooses that, then ask it to
/// connect to the target, by address or by name (the proxy resolves it).
///
/// Memory: bytes are kept only while an answer is not whole, so fewer than ``maxAnswerBytes``
/// (the longest answer, a reply naming a 255-byte host) beyond the chunk being fed.
public struct SOCKS5Handshake: ProxyHandshake, Sendable {
    /// The longest answer: a reply's 4-byte head, a name's length byte and 255 bytes, a port.
    static let maxAnswerBytes = 4 + 1 + 255 + 2

    public let proxy: ProxyServer
    /// `host:port` as errors name it (brackets around an IPv6 address).
    let target: String
    /// The connect request (without the 3 bytes before the address).
    private let address: [UInt8]

    private enum Stage {
        case greeting
        case authenticating
        case connecting
        case done
    }
    private var stage = Stage.greeting
    private var received: [UInt8] = []

    /// A target SOCKS5 cannot carry returns nil: a host name empty or over 255 bytes, a port
    /// outside 1...65535 (Go's client refuses it too).
    /// - Parameters:
    ///   - host: the target's host (a name, or an address without brackets).
    ///   - port: the target's port.
    public init?(proxy: ProxyServer, host: String, port: Int) {
        guard (1...65535).contains(port) else { return nil }
        self.proxy = proxy
        target = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
        let portBytes = [UInt8(truncatingIfNeeded: port >> 8), UInt8(truncatingIfNeeded: port)]
        if let ip = IPAddressBytes(host) {
            address = [ip.bytes.count == 4 ? 1 : 4] + ip.bytes + portBytes
        } else {
            let name = Array(host.utf8)
            guard (1...255).contains(name.count) else { return nil }
            address = [3, UInt8(name.count)] + name + portBytes
        }
    }

    /// The version and the methods offered: "no authentication", and username/password when
    /// the proxy URL has a user.
    public mutating func opening() -> [UInt8] {
        proxy.username == nil ? [5, 1, 0] : [5, 2, 0, 2]
    }

    public mutating func feed(_ bytes: some Collection<UInt8>) -> ProxyHandshakeStep {
        guard stage != .done else { return .incomplete }
        received.append(contentsOf: bytes)
        let step = next()
        switch step {
        case .established, .failed: stage = .done
        case .incomplete, .send: break
        }
        return step
    }

    /// The next step from the bytes received so far.
    private mutating func next() -> ProxyHandshakeStep {
        switch stage {
        case .greeting:
            guard let choice = take(2) else { return .incomplete }
            guard choice[0] == 5 else { return failed("unexpected protocol version \(choice[0])") }
            switch choice[1] {
            case 0:
                stage = .connecting
                return .send([5, 1, 0] + address)
            case 2 where proxy.username != nil:
                // Go refuses the same lengths, once the proxy asks for them.
                let user = Array((proxy.username ?? "").utf8)
                let password = Array((proxy.password ?? "").utf8)
                guard (1...255).contains(user.count), password.count <= 255 else { return failed("invalid username/password") }
                stage = .authenticating
                return .send([1, UInt8(user.count)] + user + [UInt8(password.count)] + password)
            case 0xff:
                return failed("no acceptable authentication methods")
            default:
                return failed("unsupported authentication method \(choice[1])")
            }
        case .authenticating:
            guard let status = take(2) else { return .incomplete }
            guard status[0] == 1 else { return failed("invalid username/password version") }
            guard status[1] == 0 else { return failed("username/password authentication failed") }
            stage = .connecting
            return .send([5, 1, 0] + address)
        case .connecting:
            // The reply's head is judged once its 4 bytes are in, as Go's client does.
            guard received.count >= 4 else { return .incomplete }
            guard received[0] == 5 else { return failed("unexpected protocol version \(received[0])") }
            guard received[1] == 0 else {
                return .failed(.socksRefused(proxy: proxy, target: target, reason: Self.replyText(received[1])))
            }
            guard received[2] == 0 else { return failed("non-zero reserved field") }
            let length: Int
            switch received[3] {
            case 1: length = 4 + 4 + 2
            case 3:
                guard received.count >= 5 else { return .incomplete }
                length = 4 + 1 + Int(received[4]) + 2
            case 4: length = 4 + 16 + 2
            default: return failed("unknown address type \(received[3])")
            }
            guard take(length) != nil else { return .incomplete }
            defer { received = [] }
            return .established(rest: received)
        case .done:
            return .incomplete
        }
    }

    /// The first `count` bytes received, removed; nil until that many arrived.
    private mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard received.count >= count else { return nil }
        let head = received[..<count]
        received.removeFirst(count)
        return head
    }

    private func failed(_ why: String) -> ProxyHandshakeStep {
        .failed(.socksFailed(proxy: proxy, target: target, reason: why))
    }

    public func unanswered(_ why: String) -> ProxyError {
        .socksFailed(proxy: proxy, target: target, reason: why)
    }

    /// RFC 1928's reply codes, as Go's SOCKS client words them.
    static func replyText(_ code: UInt8) -> String {
        switch code {
        case 1: "general SOCKS server failure"
        case 2: "connection not allowed by ruleset"
        case 3: "network unreachable"
        case 4: "host unreachable"
        case 5: "connection refused"
        case 6: "TTL expired"
        case 7: "command not supported"
        case 8: "address type not supported"
        default: "unknown code: \(code)"
        }
    }
}
