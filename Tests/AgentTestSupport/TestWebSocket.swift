import NIOCore
import NIOPosix

/// A small RFC 6455 client over a real loopback socket, for tests.
///
/// It keeps every byte after the `101` response, so frames the server sends in the same
/// packet as the handshake are not lost (a race some Swift clients have). It answers pings
/// and the server's close frame; everything is bounded by the caller's timeouts.
public struct TestWebSocket {
    public enum Message: Sendable, Equatable {
        case text(String)
        case binary([UInt8])
    }

    public struct Refused: Error, CustomStringConvertible {
        public let status: Int
        public var description: String { "WebSocket upgrade refused with HTTP \(status)" }
    }

    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var buffer: [UInt8]
    /// Set once the server's close frame arrived.
    public private(set) var closeCode: Int?
    /// The reason text of the server's close frame.
    public private(set) var closeReason: String?

    /// Connects, upgrades `path`, runs `body`, then closes the socket.
    public static func withConnection<R: Sendable>(
        host: String = "127.0.0.1", port: Int, path: String, headers: [(String, String)] = [],
        _ body: (inout TestWebSocket) async throws -> R
    ) async throws -> R {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await upgrade(channel, host: "\(host):\(port)", path: path, headers: headers, body)
    }

    /// Upgrades `path` over a connected socket it takes ownership of (one end of a
    /// socketpair whose other end was handed to the server), runs `body`, then closes it.
    public static func withConnection<R: Sendable>(
        over descriptor: Int32, path: String, headers: [(String, String)] = [],
        _ body: (inout TestWebSocket) async throws -> R
    ) async throws -> R {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .withConnectedSocket(descriptor) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await upgrade(channel, host: "agent", path: path, headers: headers, body)
    }

    private static func upgrade<R: Sendable>(
        _ channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, host: String, path: String, headers: [(String, String)],
        _ body: (inout TestWebSocket) async throws -> R
    ) async throws -> R {
        try await channel.executeThenClose { inbound, outbound in
            var request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            request += "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            for (name, value) in headers { request += "\(name): \(value)\r\n" }
            request += "\r\n"
            try await outbound.write(ByteBuffer(string: request))
            var ws = TestWebSocket(inbound: inbound.makeAsyncIterator(), outbound: outbound, buffer: [])
            let status = try await ws.readHandshake()
            guard status == 101 else { throw Refused(status: status) }
            return try await body(&ws)
        }
    }

    private mutating func fill() async throws -> Bool {
        guard let chunk = try await inbound.next() else { return false }
        buffer += chunk.readableBytesView
        return true
    }

    private mutating func readHandshake() async throws -> Int {
        let separator = Array("\r\n\r\n".utf8)
        while buffer.firstRange(of: separator) == nil {
            guard try await fill() else { return 0 }
        }
        let end = buffer.firstRange(of: separator)!
        let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
        buffer.removeFirst(end.upperBound)
        let parts = head.split(separator: " ")
        return parts.count > 1 ? Int(parts[1]) ?? 0 : 0
    }

    /// The next data message; nil once the server closed (after answering its close).
    public mutating func next() async throws -> Message? {
        var fragments: [UInt8] = []
        var messageOpcode: UInt8?
        while closeCode == nil {
            guard let (fin, opcode, payload) = try await readFrame() else { return nil }
            switch opcode {
            case 0x8:
                closeCode = payload.count >= 2 ? Int(payload[0]) << 8 | Int(payload[1]) : 1005
                closeReason = String(decoding: payload.dropFirst(2), as: UTF8.self)
                try? await send(opcode: 0x8, payload: Array(payload.prefix(2)))
                return nil
            case 0x9:
                try await send(opcode: 0xA, payload: payload)
            case 0xA:
                continue
            default:
                if opcode != 0 { messageOpcode = opcode }
                fragments += payload
                if fin {
                    return messageOpcode == 0x1 ? .text(String(decoding: fragments, as: UTF8.self)) : .binary(fragments)
                }
            }
        }
        return nil
    }

    private mutating func readFrame() async throws -> (Bool, UInt8, [UInt8])? {
        func need(_ n: Int, _ ws: inout TestWebSocket) async throws -> Bool {
            while ws.buffer.count < n { guard try await ws.fill() else { return false } }
            return true
        }
        guard try await need(2, &self) else { return nil }
        let fin = buffer[0] & 0x80 != 0
        let opcode = buffer[0] & 0x0F
        let masked = buffer[1] & 0x80 != 0
        var length = Int(buffer[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard try await need(4, &self) else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            offset = 4
        } else if length == 127 {
            guard try await need(10, &self) else { return nil }
            length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
            offset = 10
        }
        let maskOffset = offset
        if masked { offset += 4 }
        guard try await need(offset + length, &self) else { return nil }
        var payload = Array(buffer[offset..<(offset + length)])
        if masked {
            let key = Array(buffer[maskOffset..<(maskOffset + 4)])
            for i in payload.indices { payload[i] ^= key[i % 4] }
        }
        buffer.removeFirst(offset + length)
        return (fin, opcode, payload)
    }

    /// Sends a masked client frame.
    public func send(opcode: UInt8, payload: [UInt8]) async throws {
        try await outbound.write(ByteBuffer(bytes: Self.maskedFrame(opcode: opcode, payload: payload)))
    }

    /// Sends bytes as they are (frames made with ``maskedFrame(fin:opcode:payload:)``, many
    /// in one write).
    public func send(raw bytes: [UInt8]) async throws {
        try await outbound.write(ByteBuffer(bytes: bytes))
    }

    /// A masked client frame; `fin` false for a fragment that more follow.
    public static func maskedFrame(fin: Bool = true, opcode: UInt8, payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count < 65536 {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += key
        // Masked in place through raw buffers: the generic `enumerated().map` of a debug
        // build spent seconds of a cooperative thread on a megabyte.
        let start = frame.count
        frame += payload
        frame.withUnsafeMutableBufferPointer { bytes in
            for index in 0..<payload.count { bytes[start + index] ^= key[index & 3] }
        }
        return frame
    }

    /// Starts the close handshake from the client side.
    public func close(code: UInt16 = 1000) async throws {
        try await send(opcode: 0x8, payload: [UInt8(code >> 8), UInt8(code & 0xFF)])
    }
}
