@testable import AgentSSH
import NIOCore
import NIOPosix
import Testing

/// The rewriter between AES-GCM and swift-nio-ssh's parser, byte for byte: what each
/// OpenSSH extension becomes inbound, what the agent's marked messages become outbound, and
/// that a client cannot pass a marker off as its own.
struct SSHMessageRewriterTests {
    /// A message: its type byte, then SSH strings (String), uint32s (UInt32) and bytes (UInt8).
    static func message(_ type: UInt8, _ fields: [Any]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(type)
        for field in fields {
            switch field {
            case let text as String: buffer.writeSSHText(text)
            case let number as UInt32: buffer.writeInteger(number)
            case let byte as UInt8: buffer.writeInteger(byte)
            default: Issue.record("unexpected field \(field)")
            }
        }
        return buffer
    }

    static let request = SSHMessageRewriter.channelRequest
    static let open = SSHMessageRewriter.channelOpen
    static let global = SSHMessageRewriter.globalRequest

    @Test func x11AndAgentRequestsBecomeMarkedEnvRequests() {
        var rewriter = SSHMessageRewriter()
        let x11 = Self.message(Self.request, [UInt32(7), "x11-req", UInt8(1), UInt8(0), "MIT-MAGIC-COOKIE-1", "00ff", UInt32(2)])
        #expect(
            rewriter.inbound(x11)
                == Self.message(
                    Self.request, [UInt32(7), "env", UInt8(1), SSHExtensionMarker.x11Request, "0 MIT-MAGIC-COOKIE-1 00ff 2"]))
        #expect(
            X11Request(encoded: "0 MIT-MAGIC-COOKIE-1 00ff 2")
                == X11Request(singleConnection: false, authProtocol: "MIT-MAGIC-COOKIE-1", authCookie: "00ff", screen: 2))
        let agent = Self.message(Self.request, [UInt32(7), "auth-agent-req@openssh.com", UInt8(0)])
        #expect(rewriter.inbound(agent) == Self.message(Self.request, [UInt32(7), "env", UInt8(0), SSHExtensionMarker.agentRequest, ""]))
        let keepalive = Self.message(Self.request, [UInt32(7), "keepalive@openssh.com", UInt8(1)])
        #expect(rewriter.inbound(keepalive) == Self.message(Self.request, [UInt32(7), "env", UInt8(1), SSHExtensionMarker.keepalive, ""]))
    }

    /// swift-nio-ssh leaves an unknown request's body unread and fails the packet; without
    /// its body it refuses the request cleanly.
    @Test func anUnknownRequestLosesItsBody() {
        var rewriter = SSHMessageRewriter()
        let unknown = Self.message(Self.request, [UInt32(3), "vendor@example.com", UInt8(1), "body", UInt32(9)])
        #expect(rewriter.inbound(unknown) == Self.message(Self.request, [UInt32(3), "vendor@example.com", UInt8(1)]))
        let known = Self.message(Self.request, [UInt32(3), "exec", UInt8(1), "ls"])
        #expect(rewriter.inbound(known) == known)
    }

    @Test func unixSocketForwardsBecomeMarkedTCPOnes() {
        var rewriter = SSHMessageRewriter()
        let direct = Self.message(Self.open, ["direct-streamlocal@openssh.com", UInt32(4), UInt32(1 << 21), UInt32(32768), "/run/x.sock", "", UInt32(0)])
        #expect(
            rewriter.inbound(direct)
                == Self.message(
                    Self.open, ["direct-tcpip", UInt32(4), UInt32(1 << 21), UInt32(32768), SSHExtensionMarker.streamLocal("/run/x.sock"), UInt32(0), "0.0.0.0", UInt32(0)]))
        let listen = Self.message(Self.global, ["streamlocal-forward@openssh.com", UInt8(1), "/tmp/r.sock"])
        #expect(rewriter.inbound(listen) == Self.message(Self.global, ["tcpip-forward", UInt8(1), SSHExtensionMarker.streamLocal("/tmp/r.sock"), UInt32(0)]))
        let cancel = Self.message(Self.global, ["cancel-streamlocal-forward@openssh.com", UInt8(1), "/tmp/r.sock"])
        #expect(
            rewriter.inbound(cancel)
                == Self.message(
                    Self.global, ["cancel-tcpip-forward", UInt8(1), SSHExtensionMarker.streamLocal("/tmp/r.sock"), UInt32(0)]))
        let keepalive = Self.message(Self.global, ["keepalive@openssh.com", UInt8(1)])
        #expect(rewriter.inbound(keepalive) == Self.message(Self.global, ["tcpip-forward", UInt8(1), SSHExtensionMarker.keepalive, UInt32(0)]))
    }

    /// A socket path holding a NUL is no path: a C string would end there, and a listener
    /// appeared at `/tmp/n` for `/tmp/n\0.sock`. OpenSSH refuses it, and so do the forwards.
    @Test func aSocketPathWithANulIsNoPath() {
        #expect(SSHExtensionMarker.streamLocalPath(SSHExtensionMarker.streamLocal("/tmp/n\u{0}.sock")) == nil)
        #expect(SSHExtensionMarker.streamLocalPath(SSHExtensionMarker.streamLocal("/tmp/n.sock")) == "/tmp/n.sock")
    }

    /// An unknown channel type is refused (it used to end the connection), with the
    /// reference's reason 3 and text instead of swift-nio-ssh's reason 2, once.
    @Test func anUnknownChannelTypeIsRefusedAsUnsupported() {
        var rewriter = SSHMessageRewriter()
        let tun = Self.message(Self.open, ["tun@openssh.com", UInt32(9), UInt32(1024), UInt32(1024), UInt32(1), UInt32(0)])
        #expect(
            rewriter.inbound(tun)
                == Self.message(
                    Self.open, ["direct-tcpip", UInt32(9), UInt32(1024), UInt32(1024), SSHExtensionMarker.unsupported("tun@openssh.com"), UInt32(0), "0.0.0.0", UInt32(0)]))
        let failure = Self.message(SSHMessageRewriter.channelOpenFailure, [UInt32(9), UInt32(2), "", ""])
        #expect(rewriter.outbound(failure) == Self.message(SSHMessageRewriter.channelOpenFailure, [UInt32(9), UInt32(3), "unsupported channel type", ""]))
        #expect(rewriter.outbound(failure) == failure)
    }

    /// With the connection's policy blocking local forwards, the refusal of a `direct-tcpip`
    /// or `direct-streamlocal` channel gets the reference's reason 1 and text.
    @Test func blockedForwardsAreRefusedWithTheReferencesText() {
        var rewriter = SSHMessageRewriter()
        SSHParsingScope.current.currentValue = SSHParsingScope(policy: SSHPolicy(blockLocalPortForwarding: true))
        defer { SSHParsingScope.current.currentValue = nil }
        _ = rewriter.inbound(Self.message(Self.open, ["direct-tcpip", UInt32(1), UInt32(1), UInt32(1), "localhost", UInt32(22), "127.0.0.1", UInt32(5)]))
        _ = rewriter.inbound(Self.message(Self.open, ["direct-streamlocal@openssh.com", UInt32(2), UInt32(1), UInt32(1), "/s", "", UInt32(0)]))
        let failure = { (id: UInt32) in Self.message(SSHMessageRewriter.channelOpenFailure, [id, UInt32(2), "", ""]) }
        #expect(
            rewriter.outbound(failure(1))
                == Self.message(
                    SSHMessageRewriter.channelOpenFailure, [UInt32(1), UInt32(1), "port forwarding is disabled", ""]))
        #expect(
            rewriter.outbound(failure(2))
                == Self.message(
                    SSHMessageRewriter.channelOpenFailure, [UInt32(2), UInt32(1), "local port forwarding is disabled", ""]))
    }

    /// A refused reverse forward's failure carries "port forwarding is disabled", as the
    /// reference's does; replies are paired with requests in order.
    @Test func aBlockedReverseForwardsFailureSaysWhy() {
        var rewriter = SSHMessageRewriter()
        SSHParsingScope.current.currentValue = SSHParsingScope(policy: SSHPolicy(blockReversePortForwarding: true))
        defer { SSHParsingScope.current.currentValue = nil }
        _ = rewriter.inbound(Self.message(Self.global, ["keepalive@openssh.com", UInt8(1)]))
        _ = rewriter.inbound(Self.message(Self.global, ["no-more-sessions@openssh.com", UInt8(0)]))
        _ = rewriter.inbound(Self.message(Self.global, ["tcpip-forward", UInt8(1), "localhost", UInt32(8080)]))
        let success = Self.message(SSHMessageRewriter.requestSuccess, [])
        let failure = Self.message(SSHMessageRewriter.requestFailure, [])
        #expect(rewriter.outbound(success) == success)
        #expect(rewriter.outbound(failure) == Self.message(SSHMessageRewriter.requestFailure, ["port forwarding is disabled"]))
        #expect(rewriter.outbound(failure) == failure)
    }

    @Test func aClientCannotSendAMarker() {
        var rewriter = SSHMessageRewriter()
        let env = Self.message(Self.request, [UInt32(1), "env", UInt8(1), SSHExtensionMarker.agentRequest, ""])
        #expect(rewriter.inbound(env) == Self.message(Self.request, [UInt32(1), SSHMessageRewriter.refused, UInt8(1)]))
        let direct = Self.message(Self.open, ["direct-tcpip", UInt32(2), UInt32(1), UInt32(1), SSHExtensionMarker.streamLocal("/etc"), UInt32(0), "1.2.3.4", UInt32(5)])
        #expect(
            rewriter.inbound(direct)
                == Self.message(
                    Self.open, ["direct-tcpip", UInt32(2), UInt32(1), UInt32(1), SSHExtensionMarker.unsupported("direct-tcpip"), UInt32(0), "0.0.0.0", UInt32(0)]))
        let forward = Self.message(Self.global, ["tcpip-forward", UInt8(1), SSHExtensionMarker.keepalive, UInt32(0)])
        #expect(rewriter.inbound(forward) == Self.message(Self.global, [SSHMessageRewriter.refused, UInt8(1)]))
    }

    @Test func theAgentsMarkedMessagesBecomeOpenSSHs() {
        var rewriter = SSHMessageRewriter()
        func forwarded(_ host: String) -> ByteBuffer {
            Self.message(Self.open, ["forwarded-tcpip", UInt32(5), UInt32(2048), UInt32(1024), host, UInt32(0), "127.0.0.1", UInt32(40000)])
        }
        #expect(
            rewriter.outbound(forwarded(SSHExtensionMarker.streamLocal("/tmp/r.sock")))
                == Self.message(
                    Self.open, ["forwarded-streamlocal@openssh.com", UInt32(5), UInt32(2048), UInt32(1024), "/tmp/r.sock", ""]))
        #expect(
            rewriter.outbound(forwarded(SSHExtensionMarker.x11Channel))
                == Self.message(
                    Self.open, ["x11", UInt32(5), UInt32(2048), UInt32(1024), "127.0.0.1", UInt32(40000)]))
        #expect(
            rewriter.outbound(forwarded(SSHExtensionMarker.agentChannel))
                == Self.message(
                    Self.open, ["auth-agent@openssh.com", UInt32(5), UInt32(2048), UInt32(1024)]))
        #expect(rewriter.outbound(forwarded("localhost")) == forwarded("localhost"))
        let probe = Self.message(Self.global, ["tcpip-forward", UInt8(1), SSHExtensionMarker.keepalive, UInt32(0)])
        #expect(rewriter.outbound(probe) == Self.message(Self.global, ["keepalive@openssh.com", UInt8(1)]))
    }

    @Test func otherMessagesAndShortOnesPassUntouched() {
        var rewriter = SSHMessageRewriter()
        for payload in [Self.message(94, [UInt32(1), "data"]), Self.message(Self.open, []), Self.message(Self.request, [UInt32(1)]), ByteBuffer()] {
            #expect(rewriter.inbound(payload) == payload)
            #expect(rewriter.outbound(payload) == payload)
        }
    }

    @Test func theNonceCountsInItsLastEightBytesAndPacketsArePadded() {
        var nonce: [UInt8] = [1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0xff]
        InterposingAESGCM.increment(&nonce)
        #expect(nonce == [1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 1, 0])
        var wrapped: [UInt8] = [9, 9, 9, 9] + [UInt8](repeating: 0xff, count: 8)
        InterposingAESGCM.increment(&wrapped)
        #expect(wrapped == [9, 9, 9, 9] + [UInt8](repeating: 0, count: 8))
        for size in [1, 10, 11, 12, 27, 100] {
            var packet = ByteBuffer(bytes: [0, 0, 0, 0])
            InterposingAESGCM.reframe(&packet, payload: ByteBuffer(bytes: [UInt8](repeating: 7, count: size)))
            let length = Int(packet.getInteger(at: 0, as: UInt32.self)!)
            let padding = Int(packet.getInteger(at: 4, as: UInt8.self)!)
            #expect(length == packet.readableBytes - 4 && length % 16 == 0 && padding >= 4 && length == 1 + size + padding)
        }
    }
}
