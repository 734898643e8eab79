import AgentRPC
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

/// Our word-at-a-time framing must produce exactly the bytes NIO's encoder produces.
struct WebSocketFramingTests {
    static let key = WebSocketMaskingKey([0x37, 0xFA, 0x21, 0x3D])!

    @Test func maskMatchesNIOForEveryLengthAndIsItsOwnInverse() {
        for length in Array(0...70) + [125, 126, 127, 65535, 65536, 100_003] {
            let original = ByteBuffer(bytes: (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
            var ours = original
            ours.wordMask(Self.key)
            var theirs = original
            theirs.webSocketMask(Self.key)
            #expect(ours == theirs, "length \(length)")
            ours.wordMask(Self.key)
            #expect(ours == original, "length \(length)")
        }
    }

    @Test func unmaskedBytesMatchesTheFrameData() {
        for length in [0, 1, 5, 8, 9, 1000] {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0) }
            var masked = ByteBuffer(bytes: payload)
            masked.webSocketMask(Self.key)
            let frame = WebSocketFrame(fin: true, opcode: .binary, maskKey: Self.key, data: masked)
            #expect(frame.unmaskedBytes == payload)
            #expect(WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(bytes: payload)).unmaskedBytes == payload)
        }
    }

    /// Header forms (7-bit, 16-bit, 64-bit lengths), flags, opcodes, masked or not.
    @Test func writerEncodesLikeNIO() throws {
        let frames: [WebSocketFrame] =
            [125, 126, 65535, 65536].flatMap { length -> [WebSocketFrame] in
                let data = ByteBuffer(bytes: [UInt8](repeating: 0xA5, count: length))
                return [
                    WebSocketFrame(fin: true, opcode: .binary, data: data),
                    WebSocketFrame(fin: false, opcode: .continuation, maskKey: Self.key, data: data),
                ]
            } + [
                WebSocketFrame(fin: true, opcode: .ping, maskKey: Self.key, data: ByteBuffer(bytes: [1, 2, 3])),
                WebSocketFrame(fin: true, opcode: .connectionClose, data: ByteBuffer(bytes: [0x03, 0xE8])),
            ]
        for frame in frames {
            #expect(try encodeWithOurs(frame) == encodeWithNIO(frame))
        }
    }

    func encodeWithNIO(_ frame: WebSocketFrame) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: WebSocketFrameEncoder())
        try channel.writeOutbound(frame)
        return try drain(channel)
    }

    func encodeWithOurs(_ frame: WebSocketFrame) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: WebSocketFrameEncoder())
        let writer = try WebSocketFraming.installWriter(on: channel)
        writer.write(frame)
        return try drain(channel)
    }

    func drain(_ channel: EmbeddedChannel) throws -> [UInt8] {
        var out: [UInt8] = []
        while let part = try channel.readOutbound(as: ByteBuffer.self) { out += part.readableBytesView }
        _ = try channel.finish()
        return out
    }
}
