import NIOCore
import NIOEmbedded
import OutboundProxy

/// What the outbound proxy reads from outside: a proxy's answer to `CONNECT` (the same outcome
/// however the bytes are split; the bytes after a 200 kept whole; through the handler, the
/// bytes behind the tunnel are exactly those after the head), a SOCKS5 proxy's answers (the
/// same messages sent and the same outcome however they are split, with or without
/// credentials; the target's bytes after the reply kept whole, through the handler too) and
/// the proxy variables (`HTTP_PROXY`, `NO_PROXY`, ...: any text gives a choice or an error,
/// never a trap, and loopback targets are never proxied). The first byte picks which.
public func fuzzOutboundProxy(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    let pick = input.byte()
    let split = input.byte()
    let bytes = input.rest()
    switch pick % 3 {
    case 0: answer(bytes, split: split)
    case 1: environment(bytes, split: split)
    default: socks(bytes, split: split)
    }
    return 0
}

private func answer(_ bytes: [UInt8], split: UInt8) {
    var whole = ProxyConnectAnswer()
    let wholeOutcome = whole.feed(bytes)
    var chunked = ProxyConnectAnswer()
    var splitter = FuzzInput(Array(repeating: split, count: bytes.count))
    var chunkedOutcome = ProxyConnectAnswer.Outcome.incomplete
    var after: [UInt8] = []
    for chunk in splitter.chunks(of: bytes, maxChunk: Int(split % 64) + 1) {
        if case .established = chunkedOutcome {
            after += chunk
            continue
        }
        if chunkedOutcome != .incomplete { break }
        chunkedOutcome = chunked.feed(chunk)
    }
    if case .established(let rest) = chunkedOutcome { chunkedOutcome = .established(rest: rest + after) }
    // A head cut off by the size bound may be seen in one chunk and not the other only when
    // both are malformed or incomplete.
    switch (wholeOutcome, chunkedOutcome) {
    case (.malformed, .malformed), (.malformed, .incomplete), (.incomplete, .malformed):
        break
    default:
        require(wholeOutcome == chunkedOutcome, "the outcome depends on the split: \(wholeOutcome) \(chunkedOutcome)")
    }
    let proxy = ProxyServer(kind: .http, host: "127.0.0.1", port: 3128)
    guard let passed = throughHandler(.tunnel(proxy), bytes, split: split) else { return }
    if case .established(let rest) = wholeOutcome {
        require(passed == rest, "the bytes after the head did not pass whole")
    } else {
        require(passed.isEmpty, "bytes passed without a tunnel")
    }
}

/// The proxy's `bytes` fed through the route's handler on an embedded channel, in chunks of
/// at most `split % 64 + 1`: what reaches the handlers behind it (nil if it was not set up).
private func throughHandler(_ route: ProxyRoute, _ bytes: [UInt8], split: UInt8) -> [UInt8]? {
    let channel = EmbeddedChannel()
    defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
    guard (try? route.addHandlers(to: channel.pipeline.syncOperations, host: "coder.example.test", port: 443)) != nil,
        (try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()) != nil
    else { return nil }
    var passed: [UInt8] = []
    var buffer = channel.allocator.buffer(bytes: bytes)
    while buffer.readableBytes > 0, channel.isActive {
        let slice = buffer.readSlice(length: min(buffer.readableBytes, Int(split % 64) + 1))!
        _ = try? channel.writeInbound(slice)
    }
    while let read = try? channel.readInbound(as: ByteBuffer.self) { passed += read.readableBytesView }
    return passed
}

/// The steps of a SOCKS5 handshake fed `bytes` in chunks of at most `maxChunk` (each `.send`
/// followed by an empty feed, as the handler does); bytes fed after it ended are the rest's.
private func socksSteps(_ proxy: ProxyServer, _ bytes: [UInt8], maxChunk: Int) -> [ProxyHandshakeStep] {
    guard var handshake = SOCKS5Handshake(proxy: proxy, host: "coder.example.test", port: 443) else { return [] }
    _ = handshake.opening()
    var steps: [ProxyHandshakeStep] = []
    var index = 0
    while index < bytes.count {
        let chunk = Array(bytes[index..<min(index + maxChunk, bytes.count)])
        index += chunk.count
        if case .established(let rest) = steps.last {
            steps[steps.count - 1] = .established(rest: rest + chunk)
            continue
        }
        if case .failed = steps.last { break }
        var step = handshake.feed(chunk)
        while case .send = step {
            steps.append(step)
            step = handshake.feed(EmptyCollection())
        }
        if step != .incomplete { steps.append(step) }
    }
    return steps
}

private func socks(_ bytes: [UInt8], split: UInt8) {
    let proxy = ProxyServer(kind: .socks5, host: "127.0.0.1", port: 1080, username: split & 0x80 == 0 ? nil : "agent", password: "pw")
    let whole = socksSteps(proxy, bytes, maxChunk: max(bytes.count, 1))
    let chunked = socksSteps(proxy, bytes, maxChunk: Int(split % 64) + 1)
    require(whole == chunked, "the SOCKS5 steps depend on the split: \(whole) \(chunked)")
    guard let passed = throughHandler(.socks(proxy), bytes, split: split) else { return }
    if case .established(let rest) = whole.last {
        require(passed == rest, "the target's bytes did not pass whole")
    } else {
        require(passed.isEmpty, "bytes passed before the proxy connected")
    }
}

private func environment(_ bytes: [UInt8], split: UInt8) {
    let text = String(decoding: bytes, as: UTF8.self)
    let parts = text.split(separator: "\n", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
    let variables = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"]
    var environment: [String: String] = [:]
    for (name, value) in zip(variables, parts) { environment[name] = value }
    let target = parts.count > 3 ? parts[3] : "example.com"
    let proxies = ProxyEnvironment(environment: environment)
    for scheme in ["http", "https", "ws", "wss"] {
        _ = try? proxies.proxy(scheme: scheme, host: target, port: Int(split))
        _ = try? proxies.proxy(url: "\(scheme)://\(target)/")
        // A route is chosen for any text, and names the proxy the environment gave.
        if let route = try? ProxyRoute.choose(scheme: scheme, host: target, port: Int(split), environment: proxies, anyProxyKind: true) {
            require(route.proxy == (try? proxies.proxy(scheme: scheme, host: target, port: Int(split))) ?? nil, "the route's proxy is not the environment's")
        }
        for loopback in ["localhost", "127.0.0.1", "127.1.2.3", "::1"] {
            let chosen = try? proxies.proxy(scheme: scheme, host: loopback, port: Int(split))
            require(chosen == nil, "a loopback target \(loopback) was proxied")
        }
    }
}
