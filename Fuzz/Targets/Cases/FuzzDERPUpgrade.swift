import DERP
import NIOCore
import NIOEmbedded

/// A DERP relay's answer to the client's upgrade request (DERP's `DERPUpgradeHandler`, over
/// `Upgrade: DERP` or the WebSocket handshake, whose right `Sec-WebSocket-Accept` the input
/// can ask for with `{accept}` in the head), split anywhere, with or without the connection
/// closing after it. The request is the reference's; the outcome (still waiting, upgraded with
/// what was forwarded, or failed with its text) does not depend on the split; a closed
/// connection never leaves the attempt waiting; after a plain 101, exactly the bytes behind
/// the head reach the DERP side; a head over 16 KiB never upgrades; a refusal's body is its
/// `Content-Length` at most.
public func fuzzDERPUpgrade(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let webSocket = input.bool()
    let close = input.bool()
    let split = input.byte()
    let answer = input.rest()
    let whole = upgrade(answer, webSocket: webSocket, close: close) { [$0] }
    let chunked = upgrade(answer, webSocket: webSocket, close: close) { bytes in
        var splitter = FuzzInput(Array(repeating: split, count: bytes.count))
        return splitter.chunks(of: bytes, maxChunk: Int(split % 64) + 1)
    }
    require(whole == chunked, "the outcome depends on the split: \(whole) against \(chunked)")
    if close { require(whole != .pending, "a closed connection left the attempt waiting") }
    if !webSocket, case .failed(let text) = whole { checkRefusalBody(text, answer) }
    // The plain upgrade's answer reaches the handler as it is (the WebSocket one's head is rewritten).
    guard !webSocket, case .upgraded(let forwarded) = whole, let end = answer.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else {
        return 0
    }
    require(end <= 16 << 10, "a head of \(end) bytes upgraded")
    let status = String(decoding: answer[..<end], as: UTF8.self).split(separator: "\r\n").first?.split(separator: " ", maxSplits: 2) ?? []
    require(status.count >= 2 && Int(status[1]) == 101, "upgraded on \(status.prefix(2))")
    require(forwarded == Array(answer[end...]), "the bytes behind the head were not forwarded as they came")
    return 0
}

/// One attempt on a fresh embedded channel: the answer (its head's `{accept}` replaced with
/// the accept this attempt's key calls for), cut into chunks by `split`.
private func upgrade(_ answer: [UInt8], webSocket: Bool, close: Bool, split: ([UInt8]) -> [[UInt8]]) -> DERPUpgradeFuzzing.Outcome {
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
    do {
        let run = try DERPUpgradeFuzzing(webSocket: webSocket, on: channel)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        var request: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { request += buffer.readableBytesView }
        let text = String(decoding: request, as: UTF8.self)
        require(text.hasPrefix("GET /derp HTTP/1.1\r\nHost: relay.test\r\n") && text.hasSuffix("\r\n\r\n"), "request \(text)")
        require(text.contains(webSocket ? "Upgrade: websocket\r\n" : "Upgrade: DERP\r\n"), "request \(text)")
        var bytes = answer
        if webSocket, let end = answer.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound {
            bytes = replacing(Array(answer[..<end]), "{accept}", with: DERPUpgradeFuzzing.accept(for: request)) + answer[end...]
        }
        for chunk in split(bytes) { run.feed(chunk) }
        if close, channel.isActive { try? channel.close().wait() }
        return run.outcome
    } catch {
        require(false, "the embedded channel failed: \(error)")
        return .pending
    }
}

/// `bytes` with every `target` replaced.
private func replacing(_ bytes: [UInt8], _ target: String, with replacement: String) -> [UInt8] {
    let target = Array(target.utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        if bytes[index...].starts(with: target) {
            out += replacement.utf8
            index += target.count
        } else {
            out.append(bytes[index])
            index += 1
        }
    }
    return out
}

/// A refusal's text carries at most its `Content-Length` of the body.
private func checkRefusalBody(_ text: String, _ answer: [UInt8]) {
    let marker = "'Upgrade: derp'): "
    guard text.hasPrefix("GET failed with status code "), let at = text.firstRange(of: marker),
        let end = answer.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound
    else { return }
    let lines = String(decoding: answer[..<end], as: UTF8.self).split(separator: "\r\n").dropFirst()
    guard let field = lines.first(where: { $0.lowercased().hasPrefix("content-length:") }),
        let length = Int(trimmed(field.dropFirst("content-length:".count)))
    else { return }
    let body = text[at.upperBound...]
    require(body.unicodeScalars.count <= max(0, length), "a body of \(body.unicodeScalars.count) for a Content-Length of \(length)")
}

/// Without leading and trailing spaces, tabs and line ends (as the handler reads a field).
private func trimmed(_ text: Substring) -> Substring {
    let space: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
    guard let first = text.firstIndex(where: { !space($0) }), let last = text.lastIndex(where: { !space($0) }) else { return "" }
    return text[first...last]
}
