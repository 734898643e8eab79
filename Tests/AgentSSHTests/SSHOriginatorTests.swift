@testable import AgentSSH
import AgentTestSupport
import NIOCore
import Testing

/// `direct-tcpip` opens whose originator swift-nio-ssh cannot parse as an IP address (RFC 4254
/// makes it a free string): the rewriter makes them parseable instead of letting the parser
/// end the connection.
struct SSHOriginatorRewriteTests {
    static let open = SSHMessageRewriter.channelOpen
    static func directTCPIP(_ id: UInt32, host: String, port: UInt32, origin: String, originPort: UInt32) -> ByteBuffer {
        SSHMessageRewriterTests.message(open, ["direct-tcpip", id, UInt32(1 << 21), UInt32(32768), host, port, origin, originPort])
    }

    @Test(arguments: ["", "not-an-ip", String(repeating: "h", count: 300), "localhost", "::1%", "1.2.3"])
    func anOriginatorThatIsNotAnIPAddressBecomesZero(origin: String) {
        var rewriter = SSHMessageRewriter()
        let sent = Self.directTCPIP(5, host: "127.0.0.1", port: 8080, origin: origin, originPort: 4242)
        #expect(rewriter.inbound(sent) == Self.directTCPIP(5, host: "127.0.0.1", port: 8080, origin: "0.0.0.0", originPort: 0))
    }

    @Test func anIPOriginatorPassesUntouched() {
        var rewriter = SSHMessageRewriter()
        for origin in ["127.0.0.1", "::1", "fd7a:115c:a1e0::1", "0.0.0.0"] {
            let sent = Self.directTCPIP(5, host: "example.com", port: 443, origin: origin, originPort: 65535)
            #expect(rewriter.inbound(sent) == sent)
        }
    }

    /// Ports beyond 65535 also failed the parser: an originator's becomes 0; a target's
    /// becomes 0, which the server refuses for that channel alone.
    @Test func portsBeyond65535() {
        var rewriter = SSHMessageRewriter()
        #expect(
            rewriter.inbound(Self.directTCPIP(1, host: "h", port: 22, origin: "10.0.0.1", originPort: 70000))
                == Self.directTCPIP(1, host: "h", port: 22, origin: "0.0.0.0", originPort: 0))
        #expect(
            rewriter.inbound(Self.directTCPIP(1, host: "h", port: 70000, origin: "10.0.0.1", originPort: 1))
                == Self.directTCPIP(1, host: "h", port: 0, origin: "0.0.0.0", originPort: 0))
    }

    /// A payload cut short is refused alone, with the reference's `ConnectionFailed` text.
    @Test func aShortPayloadIsRefusedAlone() {
        var rewriter = SSHMessageRewriter()
        let short = SSHMessageRewriterTests.message(Self.open, ["direct-tcpip", UInt32(7), UInt32(1), UInt32(1), "host"])
        #expect(
            rewriter.inbound(short)
                == SSHMessageRewriterTests.message(
                    Self.open, ["direct-tcpip", UInt32(7), UInt32(1), UInt32(1), SSHExtensionMarker.unsupported("direct-tcpip"), UInt32(0), "0.0.0.0", UInt32(0)]))
        let failure = SSHMessageRewriterTests.message(SSHMessageRewriter.channelOpenFailure, [UInt32(7), UInt32(2), "", ""])
        #expect(
            rewriter.outbound(failure)
                == SSHMessageRewriterTests.message(
                    SSHMessageRewriter.channelOpenFailure, [UInt32(7), UInt32(2), "error parsing forward data", ""]))
    }

    /// A client's `forwarded-tcpip` (only servers open those) is refused as unsupported,
    /// never parsed.
    @Test func aClientsForwardedTCPIPIsRefusedUnparsed() {
        var rewriter = SSHMessageRewriter()
        let sent = SSHMessageRewriterTests.message(Self.open, ["forwarded-tcpip", UInt32(3), UInt32(1), UInt32(1), "h", UInt32(1), "", UInt32(0)])
        #expect(
            rewriter.inbound(sent)
                == SSHMessageRewriterTests.message(
                    Self.open, ["direct-tcpip", UInt32(3), UInt32(1), UInt32(1), SSHExtensionMarker.unsupported("forwarded-tcpip"), UInt32(0), "0.0.0.0", UInt32(0)]))
    }
}

/// The same over a real connection: odd originators open their forwards, and the session
/// already running on the connection lives on (before, the first one closed the connection
/// silently, and every session on it).
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHOriginatorConnectionTests {
    /// Echoes what it reads.
    final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.writeAndFlush(data, promise: nil) }
    }

    @Test func oddOriginatorsOpenTheirForwardsAndSessionsSurvive() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let echo = try await LoopbackListener { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Echo()) }
        }
        defer { Task { await echo.close() } }
        let client = try await SSHTestClient.connect(port: server.port)
        defer { Task { await client.close() } }
        let session = try await client.open()
        session.exec("read line; echo got $line")
        #expect(await session.wait { $0.contains(.success) }, "\(session.events)")
        for originator in OriginatorClientCipher.originators.keys.sorted() {
            let forward = try await client.directTCPIP(port: echo.port, originator: UInt16(originator))
            forward.write("ping \(originator)")
            #expect(await forward.wait { _ in forward.stdout == "ping \(originator)" }, "originator \(originator): \(forward.events)")
            try? await forward.channel.close()
        }
        session.write("still here\n")
        #expect(await session.waitForClose(), "\(session.events)")
        #expect(session.events.contains(.exitStatus(0)), "\(session.events)")
        #expect(session.stdout == "got still here\n", "\(session.events)")
    }
}
