@testable import AgentHTTP
import Foundation
import NIOCore
import NIOEmbedded
import Testing

/// ``HTTP1RequestDecoder`` in the connection's pipeline on an `EmbeddedChannel`: the reads it
/// reports (the request line measured across them: 414 against 431) and what it drops.
@Suite struct HTTP1RequestDecoderTests {
    /// What the connection writes for `reads`, each a separate read.
    static func written(_ reads: [[UInt8]]) throws -> String {
        let channel = EmbeddedChannel()
        try HTTPFuzzing.installConnection(on: channel, registry: HTTPConnectionRegistry())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var out: [UInt8] = []
        for read in reads where channel.isActive {
            _ = try? channel.writeInbound(ByteBuffer(bytes: read))
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { out += buffer.readableBytesView }
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` in reads of `size` bytes.
    static func split(_ text: String, size: Int) -> [[UInt8]] {
        let bytes = Array(text.utf8)
        return stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
    }

    @Test(arguments: [1, 7, 1000, 1 << 20])
    func anOverlongLineIs414AndOverlongFieldsAre431WhateverTheReads(size: Int) throws {
        let line = "GET /" + String(repeating: "a", count: 20_000) + " HTTP/1.1\r\nHost: x\r\n\r\n"
        #expect(try Self.written(Self.split(line, size: size)).hasPrefix("HTTP/1.1 414 "))
        let field = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"
        #expect(try Self.written(Self.split(field, size: size)).hasPrefix("HTTP/1.1 431 "))
    }

    /// After a refusal nothing more is parsed: the reads behind it are dropped unread.
    @Test func readsAfterARefusalAreDropped() throws {
        let refused = "GET /healthz HTTP/1.1\r\nHost x\r\nbroken\r\n\r\n"
        let text = try Self.written([Array(refused.utf8)] + Array(repeating: Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8), count: 50))
        #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "\(text)")
        #expect(text.hasPrefix("HTTP/1.1 400 "))
    }
}

/// The mask check of upgraded connections as the fuzz target runs it: NIO's frame decoder,
/// then each frame's mask, whatever the split.
@Suite struct WebSocketMaskCheckTests {
    static func check(_ bytes: [UInt8], split size: Int) -> Bool {
        let chunks = stride(from: 0, to: bytes.count, by: size).map { Array(bytes[$0..<min($0 + size, bytes.count)]) }
        return HTTPFuzzing.maskCheck(chunks, on: EmbeddedChannel())
    }

    @Test(arguments: [1, 3, 64])
    func unmaskedFramesAreFoundWhateverTheSplit(size: Int) {
        let masked: [UInt8] = [0x81, 0x82, 1, 2, 3, 4, UInt8(ascii: "h") ^ 1, UInt8(ascii: "i") ^ 2]
        let unmasked: [UInt8] = [0x81, 0x02, UInt8(ascii: "h"), UInt8(ascii: "i")]
        #expect(Self.check(masked + masked, split: size))
        #expect(!Self.check(masked + unmasked, split: size))
        #expect(Self.check(masked + unmasked.prefix(3), split: size), "an incomplete frame is no verdict yet")
        // A control frame longer than 125 bytes is the decoder's refusal, not a mask verdict.
        #expect(Self.check([0x89, 0x7E, 0x00, 0x80] + unmasked, split: size))
    }
}
