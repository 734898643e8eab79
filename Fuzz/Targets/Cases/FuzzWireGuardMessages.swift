import WireGuard

/// WireGuard's message decoders and the IP/TSMP parsing behind them, on a pair of devices
/// with a live session (A initiator, B responder):
/// - raw datagrams (some with a real header and B's real session index) to B: none can be
///   forged, so every one is dropped, nothing is delivered or sent, and each is counted once;
/// - arbitrary bytes tunnelled from A (some patched into a routable IPv6 header): B delivers
///   exactly the packet's IP length of them, or drops a spoofed source; TSMP pings get their
///   pong back through the tunnel;
/// - valid messages with bytes changed: a changed transport message or initiation is dropped
///   (an initiation's mac2 alone is not checked), the original still goes through;
/// - header views, TSMP and address text on raw bytes: lengths within the buffer, pongs that
///   mirror the ping, addresses that round-trip through their text.
public func fuzzWireGuardMessages(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    var input = FuzzInput(data, size)
    switch input.byte() % 4 {
    case 0: rawDatagrams(&input)
    case 1: tunnelledPackets(&input)
    case 2: changedMessages(&input)
    default: views(&input)
    }
    return 0
}

private let addressA = IPAddress("fd7a:115c:a1e0::a")!
private let addressB = IPAddress("fd7a:115c:a1e0::b")!
private let keyA = WireGuardPrivateKey(bytes: (0..<32).map { UInt8($0 + 1) })!
private let keyB = WireGuardPrivateKey(bytes: (0..<32).map { UInt8($0 + 101) })!

/// Two devices with a confirmed session, and A's last transport message to B.
private struct Pair {
    var a = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: keyA, wallClock: { 1_700_000_000_000_000_000 }))
    var b = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: keyB, wallClock: { 1_700_000_000_000_000_000 }))
    var now = WireGuardInstant.seconds(1)
    var initiation: [UInt8] = []
    var transport: [UInt8] = []

    init() {
        try! a.setPeer(WireGuardPeerConfiguration(publicKey: keyB.publicKey, allowedIPs: [IPPrefix(addressB, bits: 128)!]))
        try! b.setPeer(WireGuardPeerConfiguration(publicKey: keyA.publicKey, allowedIPs: [IPPrefix(addressA, bits: 128)!]))
        var sinkA = WireGuardCollectingSink()
        a.send(packet(from: addressA, to: addressB, [1, 2, 3]), now: now, into: &sinkA)
        initiation = sinkA.datagrams[0].bytes
        var sinkB = WireGuardCollectingSink()
        b.receive(initiation, now: now, into: &sinkB)
        sinkA = WireGuardCollectingSink()
        a.receive(sinkB.datagrams[0].bytes, now: now, into: &sinkA)
        transport = sinkA.datagrams[0].bytes
        sinkB = WireGuardCollectingSink()
        require(b.receive(transport, now: now, into: &sinkB) == .packet(keyA.publicKey, length: 43), "the pair's handshake failed")
    }

    /// A sends a packet; its transport message.
    mutating func sendFromA(_ packet: [UInt8]) -> [UInt8]? {
        var sink = WireGuardCollectingSink()
        guard a.send(packet, now: now, into: &sink) == .sent(keyB.publicKey), sink.datagrams.count == 1 else { return nil }
        return sink.datagrams[0].bytes
    }
}

private func packet(from source: IPAddress, to destination: IPAddress, nextHeader: UInt8 = 17, _ payload: [UInt8]) -> [UInt8] {
    [0x60, 0, 0, 0, UInt8(payload.count >> 8), UInt8(payload.count & 0xff), nextHeader, 64] + source.bytes + destination.bytes + payload
}

private func rawDatagrams(_ input: inout FuzzInput) {
    var pair = Pair()
    let index = Array(pair.transport[4..<8])
    let before = pair.b.counters
    var count = 0
    var sink = WireGuardCollectingSink()
    // Bounded: at most 16 datagrams per input.
    while !input.isEmpty && count < 16 {
        let mode = input.byte()
        var datagram = input.data(maxLength: 1500)
        if mode & 1 == 1, datagram.count >= 8 {
            datagram[0] = 1 + (mode >> 1) % 4
            datagram[1] = 0
            datagram[2] = 0
            datagram[3] = 0
            if mode & 2 == 2 { datagram.replaceSubrange(4..<8, with: index) }
        }
        let result = pair.b.receive(datagram, now: pair.now, into: &sink)
        guard case .dropped = result else {
            require(false, "forged datagram accepted: \(result)")
            return
        }
        count += 1
    }
    require(sink.datagrams.isEmpty && sink.packets.isEmpty, "dropped datagrams produced output")
    require(pair.b.counters.totalDrops == before.totalDrops + UInt64(count), "drops not counted once each")
}

private func tunnelledPackets(_ input: inout FuzzInput) {
    var pair = Pair()
    // Bounded: at most 8 packets per input.
    for _ in 0..<8 where !input.isEmpty {
        let mode = input.byte()
        var bytes = input.data(maxLength: 1400)
        if mode & 1 == 1 {
            let source = mode & 2 == 2 ? addressA : IPAddress(bytes: (0..<16).map { UInt8($0) ^ mode })!
            let payload = Array(bytes.prefix(Int(mode >> 2) * 8))
            bytes = packet(from: source, to: addressB, nextHeader: mode & 4 == 4 ? 99 : 17, payload) + bytes.dropFirst(payload.count)
        }
        guard let transport = pair.sendFromA(bytes) else { continue }
        let view = IPPacketView(bytes)
        require(view != nil, "A sent an invalid IP packet")
        guard let view else { return }
        var sink = WireGuardCollectingSink()
        let result = pair.b.receive(transport, now: pair.now, into: &sink)
        if view.source == addressA {
            require(result == .packet(keyA.publicKey, length: view.totalLength), "B refused a valid packet: \(result)")
            require(sink.packets.count == 1 && sink.packets[0].bytes == Array(bytes.prefix(view.totalLength)), "B delivered other bytes")
            if let pong = TSMP.pong(answering: sink.packets[0].bytes) {
                var sinkB = WireGuardCollectingSink()
                require(pair.b.send(pong, now: pair.now, into: &sinkB) == .sent(keyA.publicKey), "B could not answer a ping")
                var sinkA = WireGuardCollectingSink()
                pair.a.receive(sinkB.datagrams[0].bytes, now: pair.now, into: &sinkA)
                require(sinkA.packets.count == 1 && sinkA.packets[0].bytes == pong, "the pong did not arrive")
            }
        } else {
            require(result == .dropped(.sourceNotAllowed) && sink.packets.isEmpty, "B accepted a spoofed source: \(result)")
        }
    }
}

private func changedMessages(_ input: inout FuzzInput) {
    var pair = Pair()
    let payload = input.data(maxLength: 64)
    guard let transport = pair.sendFromA(packet(from: addressA, to: addressB, payload)) else {
        require(false, "A could not send")
        return
    }
    let useInitiation = input.bool()
    let original = useInitiation ? pair.initiation : transport
    var changed = original
    // Bounded: at most 16 changes.
    for _ in 0..<16 where !input.isEmpty {
        let position = Int(input.uint(2)) % changed.count
        changed[position] ^= max(input.byte(), 1)
    }
    if input.bool() { changed = Array(changed.prefix(Int(input.uint(2)) % (changed.count + 1))) }
    var sink = WireGuardCollectingSink()
    if useInitiation {
        // A responder that has not seen the original.
        var responder = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: keyB))
        try! responder.setPeer(WireGuardPeerConfiguration(publicKey: keyA.publicKey, allowedIPs: [IPPrefix(addressA, bits: 128)!]))
        let result = responder.receive(changed, now: pair.now, into: &sink)
        let onlyMAC2 = changed.count == original.count && changed[0..<132] == original[0..<132]
        if !onlyMAC2 { require(result != .initiationAnswered(keyA.publicKey), "a changed initiation was accepted") }
        if onlyMAC2 { require(result == .initiationAnswered(keyA.publicKey), "an initiation with another mac2 was refused: \(result)") }
    } else {
        let result = pair.b.receive(changed, now: pair.now, into: &sink)
        if changed != original {
            guard case .dropped = result else {
                require(false, "a changed transport message was accepted: \(result)")
                return
            }
            require(sink.packets.isEmpty, "a changed transport message delivered a packet")
        }
        let again = pair.b.receive(original, now: pair.now, into: &sink)
        if changed != original {
            require(again == .packet(keyA.publicKey, length: 40 + payload.count), "the original was refused after a changed copy: \(again)")
        } else {
            require(again == .dropped(.replay), "a replay was accepted")
        }
    }
}

private func views(_ input: inout FuzzInput) {
    let raw = input.data(maxLength: 2000)
    if let view = IPPacketView(raw) {
        require(view.version == 4 || view.version == 6, "a view of another version")
        require(view.headerLength <= view.totalLength && view.totalLength <= raw.count, "a view beyond its buffer")
    }
    if let pong = TSMP.pong(answering: raw) {
        require(pong.count == 51 && pong[6] == 99 && pong[7] == 64 && pong[40] == 0x6f, "a malformed pong")
        require(pong[8..<24] == raw[24..<40] && pong[24..<40] == raw[8..<24], "a pong with other addresses")
        require(pong[41..<49] == raw[41..<49] && pong[49] == 0 && pong[50] == 0, "a pong with other data")
    }
    let text = String(decoding: input.rest(), as: UTF8.self)
    if let address = IPAddress(text) {
        require(IPAddress(address.description) == address, "an address does not round-trip through its text")
        require(IPAddress(bytes: address.bytes) == address, "an address does not round-trip through its bytes")
    }
    if let prefix = IPPrefix(text) {
        require(IPPrefix(prefix.description) == prefix && prefix.contains(prefix.address), "a prefix does not round-trip")
    }
}
