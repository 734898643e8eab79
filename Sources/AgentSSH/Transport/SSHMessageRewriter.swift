import NIOCore

/// Rewrites decrypted SSH messages so that swift-nio-ssh can carry OpenSSH's extensions.
///
/// swift-nio-ssh's set of channel types and channel requests is closed: an unknown channel
/// type, or an unknown channel request with a body (`x11-req`), fails its parser and ends
/// the whole connection, and so does a `direct-tcpip` whose originator is not an IP address.
/// Inbound, each such message becomes a marked one it knows (see ``SSHExtensionMarker``), an
/// empty unknown request it refuses cleanly, or a `direct-tcpip` it can parse; outbound, the
/// agent's marked messages become the real ones. Every other message passes untouched
/// (the first byte decides).
struct SSHMessageRewriter {
    static let globalRequest: UInt8 = 80
    static let channelOpen: UInt8 = 90
    static let channelOpenFailure: UInt8 = 92
    static let channelRequest: UInt8 = 98
    static let requestSuccess: UInt8 = 81
    static let requestFailure: UInt8 = 82

    /// The channel requests swift-nio-ssh parses itself.
    static let knownChannelRequests: Set<String> = [
        "env", "exec", "exit-status", "exit-signal", "pty-req", "shell", "subsystem", "window-change", "xon-xoff", "signal",
    ]
    /// The name an inbound request gets when it must be refused (unknown to everyone).
    static let refused = "refused@workspace-agent"
    /// Client channels the agent will refuse, remembered with the reference's reason and
    /// text for the refusal (swift-nio-ssh sends reason 2 without text). Bounded: beyond it a
    /// refusal keeps swift-nio-ssh's.
    static let maxRemembered = 64

    /// RFC 4254's reason codes the reference uses.
    static let administrativelyProhibited: UInt32 = 1
    static let connectFailed: UInt32 = 2
    static let unknownChannelType: UInt32 = 3

    private(set) var refusals: [UInt32: (reason: UInt32, text: String)] = [:]

    /// The connection's policy while swift-nio-ssh parses (nil in unit tests: nothing blocked).
    var policy: SSHPolicy? { SSHParsingScope.currentPolicy }

    /// The client's global requests still waiting for a reply, in order (replies come in
    /// order): the text a failure gets, as the reference's reply payload ("" for none).
    /// Bounded: past ``maxRemembered`` the connection's replies are left as they are.
    private var pendingReplies: [String] = []
    private var repliesUntracked = false

    private mutating func noteGlobalRequest(_ payload: ByteBuffer) {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard !repliesUntracked, let name = reader.readSSHText(), reader.readInteger(as: UInt8.self) == 1 else { return }
        guard pendingReplies.count < Self.maxRemembered else {
            repliesUntracked = true
            pendingReplies = []
            return
        }
        let forward = name == "tcpip-forward" || name == "streamlocal-forward@openssh.com"
        pendingReplies.append(forward && policy?.blockReversePortForwarding == true ? "port forwarding is disabled" : "")
    }

    /// A refused reverse forward's failure carries the reference's text.
    private mutating func outboundGlobalReply(_ payload: ByteBuffer) -> ByteBuffer? {
        guard !repliesUntracked, !pendingReplies.isEmpty else { return nil }
        let text = pendingReplies.removeFirst()
        guard payload.getInteger(at: payload.readerIndex, as: UInt8.self) == Self.requestFailure, !text.isEmpty,
            payload.readableBytes == 1
        else { return nil }
        return Self.message(Self.requestFailure) { $0.writeSSHText(text) }
    }

    /// Notes how channel `channel` is to be refused; the first reason noted wins.
    private mutating func remember(_ channel: UInt32, _ reason: UInt32, _ text: String) {
        if refusals.count < Self.maxRemembered, refusals[channel] == nil { refusals[channel] = (reason, text) }
    }

    // MARK: Inbound (client to agent)

    mutating func inbound(_ payload: ByteBuffer) -> ByteBuffer {
        switch payload.getInteger(at: payload.readerIndex, as: UInt8.self) {
        case Self.channelOpen: return inboundChannelOpen(payload) ?? payload
        case Self.globalRequest:
            noteGlobalRequest(payload)
            return inboundGlobalRequest(payload) ?? payload
        case Self.channelRequest: return inboundChannelRequest(payload) ?? payload
        default: return payload
        }
    }

    private mutating func inboundChannelOpen(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard let type = reader.readSSHText(), let sender = reader.readInteger(as: UInt32.self),
            let window = reader.readInteger(as: UInt32.self), let maxPacket = reader.readInteger(as: UInt32.self)
        else { return nil }
        let header = (sender: sender, window: window, maxPacket: maxPacket)
        switch type {
        case "session":
            return nil
        case "direct-tcpip":
            if policy?.blockLocalPortForwarding == true { remember(sender, Self.administrativelyProhibited, "port forwarding is disabled") }
            return inboundDirectTCPIP(header, reader)
        case "direct-streamlocal@openssh.com":
            if policy?.blockLocalPortForwarding == true {
                remember(sender, Self.administrativelyProhibited, "local port forwarding is disabled")
            }
            // {socket path, reserved string, reserved uint32}; an unreadable path is an empty one.
            let path = reader.readSSHText() ?? ""
            return Self.directTCPIP(header, host: SSHExtensionMarker.streamLocal(path))
        default:
            remember(sender, Self.unknownChannelType, "unsupported channel type")
            return Self.directTCPIP(header, host: SSHExtensionMarker.unsupported(String(type.prefix(64))))
        }
    }

    /// A `direct-tcpip` open as swift-nio-ssh can parse it, or nil when it can as it is.
    ///
    /// RFC 4254 §7.2 makes the originator a free string (asyncssh sends "", others a host
    /// name), but swift-nio-ssh parses it as an IP address and ends the whole connection,
    /// every session on it, when it cannot. The agent never uses the originator beyond the
    /// JetBrains report, so one that is not an IP address (or a port beyond 65535) becomes
    /// 0.0.0.0 port 0; a target port beyond 65535 becomes 0, which refuses that channel
    /// alone, as does a payload too short to read (the reference's `ConnectionFailed` text).
    private mutating func inboundDirectTCPIP(_ header: (sender: UInt32, window: UInt32, maxPacket: UInt32), _ body: ByteBuffer) -> ByteBuffer? {
        var reader = body
        guard let host = reader.readSSHText(), let port = reader.readInteger(as: UInt32.self) else {
            remember(header.sender, Self.connectFailed, "error parsing forward data")
            return Self.directTCPIP(header, host: SSHExtensionMarker.unsupported("direct-tcpip"))
        }
        if SSHExtensionMarker.isMarked(host) { return Self.directTCPIP(header, host: SSHExtensionMarker.unsupported("direct-tcpip")) }
        let origin = reader.readSSHText()
        let originPort = reader.readInteger(as: UInt32.self)
        if port <= 65535, let origin, let originPort, originPort <= 65535, Self.isIPAddress(origin) { return nil }
        return Self.directTCPIP(header, host: host, port: port <= 65535 ? port : 0)
    }

    /// Whether swift-nio-ssh's parser takes `text` as an originator (it calls the same
    /// `SocketAddress(ipAddress:port:)`, inet_pton underneath).
    static func isIPAddress(_ text: String) -> Bool {
        (try? SocketAddress(ipAddress: text, port: 0)) != nil
    }

    private func inboundGlobalRequest(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard let name = reader.readSSHText(), let wantReply = reader.readInteger(as: UInt8.self) else { return nil }
        switch name {
        case "streamlocal-forward@openssh.com", "cancel-streamlocal-forward@openssh.com":
            let path = reader.readSSHText() ?? ""
            let forward = name.hasPrefix("cancel") ? "cancel-tcpip-forward" : "tcpip-forward"
            return Self.forwardRequest(forward, wantReply: wantReply, host: SSHExtensionMarker.streamLocal(path))
        case "keepalive@openssh.com":
            return Self.forwardRequest("tcpip-forward", wantReply: wantReply, host: SSHExtensionMarker.keepalive)
        case "tcpip-forward", "cancel-tcpip-forward":
            guard let host = reader.readSSHText(), SSHExtensionMarker.isMarked(host) else { return nil }
            return Self.message(Self.globalRequest) {
                $0.writeSSHText(Self.refused); $0.writeInteger(wantReply)
            }
        default:
            return nil
        }
    }

    private func inboundChannelRequest(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard let recipient = reader.readInteger(as: UInt32.self), let type = reader.readSSHText(),
            let wantReply = reader.readInteger(as: UInt8.self)
        else { return nil }
        func env(_ name: String, _ value: String) -> ByteBuffer {
            Self.channelRequest(recipient, "env", wantReply: wantReply) {
                $0.writeSSHText(name); $0.writeSSHText(value)
            }
        }
        let refusal = Self.channelRequest(recipient, Self.refused, wantReply: wantReply) { _ in }
        switch type {
        case "env":
            guard let name = reader.readSSHText(), SSHExtensionMarker.isMarked(name) else { return nil }
            return refusal
        case _ where Self.knownChannelRequests.contains(type):
            return nil
        case "x11-req":
            guard let single = reader.readInteger(as: UInt8.self), let proto = reader.readSSHText(), let cookie = reader.readSSHText(),
                let screen = reader.readInteger(as: UInt32.self), !proto.contains(" "), !cookie.contains(" ")
            else { return refusal }
            let request = X11Request(singleConnection: single != 0, authProtocol: proto, authCookie: cookie, screen: screen)
            return env(SSHExtensionMarker.x11Request, request.encoded)
        case "auth-agent-req@openssh.com":
            return env(SSHExtensionMarker.agentRequest, "")
        case "keepalive@openssh.com":
            return env(SSHExtensionMarker.keepalive, "")
        default:
            // Unknown, with its body dropped: swift-nio-ssh refuses it without losing its place.
            return Self.channelRequest(recipient, String(type.prefix(64)), wantReply: wantReply) { _ in }
        }
    }

    // MARK: Outbound (agent to client)

    mutating func outbound(_ payload: ByteBuffer) -> ByteBuffer {
        switch payload.getInteger(at: payload.readerIndex, as: UInt8.self) {
        case Self.channelOpen: return Self.outboundChannelOpen(payload) ?? payload
        case Self.channelRequest: return Self.outboundChannelRequest(payload) ?? payload
        case Self.globalRequest: return Self.outboundGlobalRequest(payload) ?? payload
        case Self.requestSuccess, Self.requestFailure: return outboundGlobalReply(payload) ?? payload
        case Self.channelOpenFailure: return outboundOpenFailure(payload) ?? payload
        default: return payload
        }
    }

    private static func outboundChannelOpen(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard reader.readSSHText() == "forwarded-tcpip", let sender = reader.readInteger(as: UInt32.self),
            let window = reader.readInteger(as: UInt32.self), let maxPacket = reader.readInteger(as: UInt32.self),
            let host = reader.readSSHText(), SSHExtensionMarker.isMarked(host), reader.readInteger(as: UInt32.self) != nil,
            let origin = reader.readSSHText(), let originPort = reader.readInteger(as: UInt32.self)
        else { return nil }
        func open(_ type: String, _ body: (inout ByteBuffer) -> Void) -> ByteBuffer {
            message(channelOpen) {
                $0.writeSSHText(type)
                $0.writeMultipleIntegers(sender, window, maxPacket)
                body(&$0)
            }
        }
        if let path = SSHExtensionMarker.streamLocalPath(host) {
            return open("forwarded-streamlocal@openssh.com") {
                $0.writeSSHText(path); $0.writeSSHText("")
            }
        }
        switch host {
        case SSHExtensionMarker.x11Channel:
            return open("x11") {
                $0.writeSSHText(origin); $0.writeInteger(originPort)
            }
        case SSHExtensionMarker.agentChannel: return open("auth-agent@openssh.com") { _ in }
        default: return nil
        }
    }

    private static func outboundChannelRequest(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard let recipient = reader.readInteger(as: UInt32.self), reader.readSSHText() == "env",
            let wantReply = reader.readInteger(as: UInt8.self), reader.readSSHText() == SSHExtensionMarker.keepalive
        else { return nil }
        return channelRequest(recipient, "keepalive@openssh.com", wantReply: wantReply) { _ in }
    }

    /// The agent's keepalive probe (a marked `tcpip-forward`) becomes `keepalive@openssh.com`.
    private static func outboundGlobalRequest(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard reader.readSSHText() == "tcpip-forward", let wantReply = reader.readInteger(as: UInt8.self),
            reader.readSSHText() == SSHExtensionMarker.keepalive
        else { return nil }
        return message(globalRequest) {
            $0.writeSSHText("keepalive@openssh.com"); $0.writeInteger(wantReply)
        }
    }

    private mutating func outboundOpenFailure(_ payload: ByteBuffer) -> ByteBuffer? {
        var reader = payload
        reader.moveReaderIndex(forwardBy: 1)
        guard let recipient = reader.readInteger(as: UInt32.self), let refusal = refusals.removeValue(forKey: recipient) else { return nil }
        return Self.message(Self.channelOpenFailure) {
            $0.writeMultipleIntegers(recipient, refusal.reason)
            $0.writeSSHText(refusal.text)
            $0.writeSSHText("")
        }
    }

    // MARK: Building messages

    private static func message(_ type: UInt8, _ body: (inout ByteBuffer) -> Void) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: 64)
        buffer.writeInteger(type)
        body(&buffer)
        return buffer
    }

    private static func directTCPIP(_ header: (sender: UInt32, window: UInt32, maxPacket: UInt32), host: String, port: UInt32 = 0) -> ByteBuffer {
        message(channelOpen) {
            $0.writeSSHText("direct-tcpip")
            $0.writeMultipleIntegers(header.sender, header.window, header.maxPacket)
            $0.writeSSHText(host)
            $0.writeInteger(port)
            $0.writeSSHText("0.0.0.0")
            $0.writeInteger(UInt32(0))
        }
    }

    private static func forwardRequest(_ name: String, wantReply: UInt8, host: String) -> ByteBuffer {
        message(globalRequest) {
            $0.writeSSHText(name)
            $0.writeInteger(wantReply)
            $0.writeSSHText(host)
            $0.writeInteger(UInt32(0))
        }
    }

    private static func channelRequest(_ recipient: UInt32, _ type: String, wantReply: UInt8, _ body: (inout ByteBuffer) -> Void) -> ByteBuffer {
        message(Self.channelRequest) {
            $0.writeInteger(recipient)
            $0.writeSSHText(type)
            $0.writeInteger(wantReply)
            body(&$0)
        }
    }
}

extension ByteBuffer {
    /// An SSH `string` (uint32 length, bytes) read as UTF-8 text; nil when short or not UTF-8.
    mutating func readSSHText() -> String? {
        guard let length = getInteger(at: readerIndex, as: UInt32.self), Int(length) <= readableBytes - 4 else { return nil }
        moveReaderIndex(forwardBy: 4)
        return readString(length: Int(length))
    }

    mutating func writeSSHText(_ text: String) {
        writeInteger(UInt32(text.utf8.count))
        writeString(text)
    }
}
