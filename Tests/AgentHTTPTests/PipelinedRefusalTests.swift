@testable import AgentHTTP
import Foundation
import NIOCore
import NIOEmbedded
import Testing

/// What a connection writes for raw client bytes, through the whole connection pipeline on
/// an `EmbeddedChannel` (no socket, no clock but the loop's own).
@Suite struct PipelinedRefusalTests {
    static func written(_ input: [UInt8]) throws -> String {
        let channel = EmbeddedChannel()
        try HTTPFuzzing.installConnection(on: channel, registry: HTTPConnectionRegistry())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var out: [UInt8] = []
        _ = try? channel.writeInbound(ByteBuffer(bytes: input))
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { out += buffer.readableBytesView }
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { out += buffer.readableBytesView }
        _ = try? channel.finish(acceptAlreadyClosed: true)
        return String(decoding: out, as: UTF8.self)
    }

    /// A route's 404 keeps the connection; the malformed request pipelined behind it is
    /// answered 400 after it, and that refusal, which closes, is the last thing written.
    /// (A libFuzzer input: the fuzz target had counted any status of 300 or more as a refusal.)
    @Test func aRefusalBehindARoutesAnswerComesAfterItAndIsLast() throws {
        let bytes: [UInt8] =
            Array("GET /a HTTP/1.1\r\nHost: x\r\n\r\nOP\nabcP\n".utf8) + [0xbf, 0xff, 0xff, 0xff, 0x0d, 0x0a]
            + [UInt8](repeating: 0x1e, count: 8)
        let text = try Self.written(bytes)
        let heads = text.components(separatedBy: "HTTP/1.1 ").dropFirst()
        #expect(heads.map { String($0.prefix(3)) } == ["404", "400"], "\(text)")
        #expect(heads.first?.lowercased().contains("connection: close") == false, "the 404 keeps the connection")
        #expect(heads.last?.contains("Connection: close") == true)
        let refusalBody = "\"message\":\"Malformed HTTP request.\"}"
        let tail = text.components(separatedBy: refusalBody).last ?? text
        #expect(text.contains(refusalBody) && tail.allSatisfy(\.isWhitespace), "nothing after the refusal: \(text)")
    }

    /// A HEAD refused by the connection (417) gets the answer's head with its length and no
    /// body, so a client reading it as HEAD's answer finds nothing extra behind it.
    @Test func aRefusedHeadGetsNoBody() throws {
        let text = try Self.written(Array("HEAD / HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n".utf8))
        #expect(text.hasPrefix("HTTP/1.1 417 "), "\(text)")
        #expect(text.contains("\r\nContent-Length: ") && text.hasSuffix("\r\n\r\n"), "\(text)")
        let get = try Self.written(Array("GET / HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n".utf8))
        #expect(get.hasPrefix("HTTP/1.1 417 ") && get.contains("\r\n\r\n{\"detail\""), "\(get)")
    }
}
