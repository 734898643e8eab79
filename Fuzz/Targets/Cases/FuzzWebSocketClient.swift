import AgentRPC
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Yamux

/// The upward connection's client side after the upgrade, as the dialer builds it: NIO's
/// frame decoder (4 MiB frames) and error handler, the agent's frame writer and its
/// WebSocket-to-yamux handler, and a client yamux session, fed the server's bytes (raw, or
/// frames built from the input) split anywhere. Everything the agent writes back must be
/// masked client frames (binary, pong or close) whose binary payloads are whole, valid
/// yamux frames. The word-at-a-time masking must equal NIO's and undo itself.
public func fuzzWebSocketClient(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 4 {
    case 0: masking(&input)
    default: session(&input)
    }
    return 0
}

private func masking(_ input: inout FuzzInput) {
    var keyBytes = input.take(4)
    while keyBytes.count < 4 { keyBytes.append(0) }
    let key = WebSocketMaskingKey(keyBytes)!
    let payload = input.rest()
    var ours = ByteBuffer(bytes: payload)
    ours.wordMask(key)
    var theirs = ByteBuffer(bytes: payload)
    theirs.webSocketMask(key)
    require(ours == theirs, "word masking differs from NIO's")
    require(WebSocketFrame(fin: true, opcode: .binary, maskKey: key, data: ours).unmaskedBytes == payload, "unmasking is not masking's inverse")
    ours.wordMask(key)
    require(Array(ours.readableBytesView) == payload, "masking twice is not the identity")
}

private func session(_ input: inout FuzzInput) {
    var stream: [UInt8] = []
    if input.bool() {
        stream = input.take(input.remaining - min(input.remaining / 4, 64))
    } else {
        // Server frames: FIN and opcode from the input, unmasked, 7- or 16-bit lengths.
        var frames = 0
        while input.remaining > 2, frames < 32 {
            frames += 1
            let opcodes: [UInt8] = [0x2, 0x0, 0x9, 0xA, 0x8, 0x1, 0x3]
            let first = (input.bool() ? 0x80 : 0) | opcodes[Int(input.byte()) % opcodes.count]
            let payload = input.data(maxLength: 400)
            stream.append(first)
            if payload.count < 126 {
                stream.append(UInt8(payload.count))
            } else {
                stream += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
            }
            stream += payload
        }
    }
    let chunks = input.chunks(of: stream, maxChunk: 200)
    // The session's executor is the channel's loop: a testing loop with a thread of its own.
    let written = runBlocking { await exchange(chunks) }
    checkClientFrames(written)
}

/// Feeds `chunks` to a client connection, as the dialer sets it up after the upgrade, and
/// returns what the agent wrote.
private func exchange(_ chunks: [[UInt8]]) async -> [UInt8] {
    let channel = NIOAsyncTestingChannel()
    do {
        try await channel.testingEventLoop.executeInContext {
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(WebSocketFrameEncoder())
            try pipeline.addHandler(ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: WebSocketDialer.maxMessageSize)))
            try pipeline.addHandler(WebSocketProtocolErrorHandler(isServer: false))
            _ = try YamuxSession.overWebSocket(channel, role: .client)
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1))
    } catch {
        require(false, "pipeline: \(error)")
    }
    var written: [UInt8] = []
    func drain() async {
        while let buffer = try? await channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
    }
    for chunk in chunks where channel.isActive {
        _ = try? await channel.writeInbound(ByteBuffer(bytes: chunk))
        // The session's lazy flush (1 ms) and any sweep come due.
        await channel.testingEventLoop.advanceTime(by: .milliseconds(2))
        await drain()
    }
    _ = try? await channel.close()
    await channel.testingEventLoop.advanceTime(by: .seconds(10))
    await drain()
    _ = try? await channel.finish(acceptAlreadyClosed: true)
    return written
}

/// Parses the client's frames: each masked, binary, pong or close, and the binary payloads
/// together whole, valid yamux frames.
private func checkClientFrames(_ bytes: [UInt8]) {
    var at = 0
    var yamux: [UInt8] = []
    while at < bytes.count {
        require(bytes.count - at >= 2, "a cut frame header")
        let opcode = bytes[at] & 0x0F
        require(bytes[at + 1] & 0x80 != 0, "an unmasked client frame")
        var length = Int(bytes[at + 1] & 0x7F)
        var header = 2
        require(bytes.count - at >= (length == 126 ? 4 : length == 127 ? 10 : 2), "a cut frame header")
        if length == 126 {
            length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            header = 4
        } else if length == 127 {
            length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[at + 2 + $1]) }
            header = 10
        }
        require(bytes.count - at >= header + 4 + length, "a cut frame")
        let key = Array(bytes[(at + header)..<(at + header + 4)])
        let payload = bytes[(at + header + 4)..<(at + header + 4 + length)].enumerated().map { $0.element ^ key[$0.offset % 4] }
        require([0x2, 0x8, 0xA].contains(opcode), "a client frame with opcode \(opcode)")
        if opcode == 0x2 { yamux += payload }
        at += header + 4 + length
    }
    var decoder = YamuxFrameDecoder(maxPayload: UInt32.max)
    decoder.feed(yamux)
    var framed = 0
    do {
        while let frame = try decoder.next() { framed += YamuxHeader.size + frame.payload.count }
    } catch {
        require(false, "the agent sent invalid yamux: \(error)")
    }
    require(framed == yamux.count, "the agent's binary messages end inside a yamux frame")
}
