import AgentHTTP
import NIOCore
import NIOEmbedded

/// What every HTTP connection goes through before a route: the request decoder's byte
/// reports (request-line measuring for 414 against 431, the refusals written without the
/// codec), NIO's HTTP/1 decoder with the agent's limits and the request guard (Expect,
/// Content-Length, CONNECT, Upgrade), fed raw client bytes split anywhere. What comes back
/// must be a sequence of whole HTTP/1.1 responses, and nothing may follow a refusal. The
/// WebSocket mask check of upgraded connections (NIO's frame decoder, then the frames'
/// mask) must agree with a plain reading of the frames, however the bytes are split; the
/// WebSocket session's state machine must keep its rules whatever frames and events come.
public func fuzzHTTPGuard(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 4 {
    case 0: maskCheck(&input)
    case 1: webSocketSession(&input)
    default: connection(&input)
    }
    return 0
}

private func connection(_ input: inout FuzzInput) {
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 256)
    let channel = EmbeddedChannel()
    do {
        try HTTPFuzzing.installConnection(on: channel, registry: HTTPConnectionRegistry())
        // An EmbeddedChannel is active once "connected".
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    } catch {
        require(false, "pipeline: \(error)")
    }
    var written: [UInt8] = []
    func drain() {
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
    }
    for chunk in chunks where channel.isActive {
        _ = try? channel.writeInbound(ByteBuffer(bytes: chunk))
        drain()
    }
    // The head deadline and the linger time come due.
    channel.embeddedEventLoop.advanceTime(by: .seconds(30))
    drain()
    _ = try? channel.finish(acceptAlreadyClosed: true)
    checkResponses(written)
}

/// Whole responses, each with a status line and (but for 100) a Content-Length body;
/// nothing after a response that closes the connection (`Connection: close`: every
/// refusal says it; a route's 404 does not, and the connection serves on).
private func checkResponses(_ bytes: [UInt8]) {
    var at = 0
    var refused = false
    let separator: [UInt8] = [13, 10, 13, 10]
    while at < bytes.count {
        require(!refused, "bytes after a response that closes the connection")
        let rest = bytes[at...]
        require(rest.starts(with: Array("HTTP/1.1 ".utf8)), "not a status line: \(String(decoding: rest.prefix(40), as: UTF8.self))")
        guard let end = rest.firstRange(of: separator) else {
            require(false, "a cut response head")
            return
        }
        let head = String(decoding: bytes[at..<end.lowerBound], as: UTF8.self)
        let status = Int(head.dropFirst(9).prefix(3)) ?? 0
        require((100...599).contains(status), "status \(status)")
        var length = 0
        if status != 100 {
            let lines = head.split(separator: "\r\n").dropFirst()
            let field = lines.first { $0.lowercased().hasPrefix("content-length:") }
            require(field != nil, "a response without Content-Length")
            length = Int(field!.dropFirst("content-length:".count).trimmingPrefix(" ")) ?? -1
            require(length >= 0, "a bad Content-Length")
        }
        require(bytes.count - end.upperBound >= length, "a cut response body")
        at = end.upperBound + length
        if head.lowercased().contains("\r\nconnection: close") { refused = true }
    }
}

private func webSocketSession(_ input: inout FuzzInput) {
    if let broken = HTTPFuzzing.webSocketSession(input.rest()) {
        require(false, "WebSocket session: \(broken)")
    }
}

private func maskCheck(_ input: inout FuzzInput) {
    let stream = input.take(input.remaining - min(input.remaining / 4, 64))
    let chunks = input.chunks(of: stream, maxChunk: 40)
    let whole = HTTPFuzzing.maskCheck([stream], on: EmbeddedChannel())
    require(HTTPFuzzing.maskCheck(chunks, on: EmbeddedChannel()) == whole, "the mask check depends on where the bytes are split")
    require(whole == allMasked(stream), "the mask check disagrees with a plain reading of the frames")
}

/// Walks frames (2 bytes, extended length, 4-byte key if masked, payload): false at the
/// first complete frame without the mask bit; true at an incomplete one, or at one NIO's
/// frame decoder refuses (over the agent's frame limit, a fragmented or long control frame).
private func allMasked(_ bytes: [UInt8]) -> Bool {
    var at = 0
    while bytes.count - at >= 2 {
        let first = bytes[at]
        let masked = bytes[at + 1] & 0x80 != 0
        let length7 = Int(bytes[at + 1] & 0x7F)
        let extended = length7 == 126 ? 2 : length7 == 127 ? 8 : 0
        guard bytes.count - at >= 2 + extended else { return true }
        var length: UInt64 = UInt64(length7)
        if extended > 0 { length = bytes[(at + 2)..<(at + 2 + extended)].reduce(0) { $0 << 8 | UInt64($1) } }
        let control = first & 0x08 != 0
        if length > UInt64(WebSocketLimits.maxFrameBytes) || (control && (first & 0x80 == 0 || length > 125)) { return true }
        let payloadStart = at + 2 + extended + (masked ? 4 : 0)
        guard bytes.count >= payloadStart, UInt64(bytes.count - payloadStart) >= length else { return true }
        if !masked { return false }
        at = payloadStart + Int(length)
    }
    return true
}
