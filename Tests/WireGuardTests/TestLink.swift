import WireGuard

/// Two devices wired back to back with a hand-driven clock: A (address `addressA`) and B
/// (`addressB`), each the other's only peer with a /128.
struct TestLink {
    var a: WireGuardDevice
    var b: WireGuardDevice
    let keyA: WireGuardPrivateKey
    let keyB: WireGuardPrivateKey
    let addressA = IPAddress("fd7a:115c:a1e0::a")!
    let addressB = IPAddress("fd7a:115c:a1e0::b")!
    var now = WireGuardInstant.seconds(1)
    /// What each side received as plaintext, in order.
    var deliveredToA: [[UInt8]] = []
    var deliveredToB: [[UInt8]] = []
    /// Every datagram each side put on the wire, in order, with the time.
    var wireFromA: [(at: WireGuardInstant, bytes: [UInt8])] = []
    var wireFromB: [(at: WireGuardInstant, bytes: [UInt8])] = []
    /// When false, what that side sends is recorded but never delivered (a dead path).
    var deliverFromA = true
    var deliverFromB = true

    init(
        wallClockA: @escaping @Sendable () -> UInt64 = { 1_700_000_000_000_000_000 },
        wallClockB: @escaping @Sendable () -> UInt64 = { 1_700_000_000_000_000_000 }
    ) throws {
        keyA = WireGuardPrivateKey.generate()
        keyB = WireGuardPrivateKey.generate()
        a = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: keyA, wallClock: wallClockA))
        b = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: keyB, wallClock: wallClockB))
        try a.setPeer(WireGuardPeerConfiguration(publicKey: keyB.publicKey, allowedIPs: [IPPrefix(addressB, bits: 128)!]))
        try b.setPeer(WireGuardPeerConfiguration(publicKey: keyA.publicKey, allowedIPs: [IPPrefix(addressA, bits: 128)!]))
    }

    /// A UDP-ish payload packet from A to B (or back), protocol 17 with a fake header.
    func packet(fromA: Bool, _ body: [UInt8]) -> [UInt8] {
        ipv6Packet(source: fromA ? addressA : addressB, destination: fromA ? addressB : addressA, nextHeader: 17, payload: body)
    }

    /// A sends an IP packet; what it put on the wire is returned (not yet delivered).
    mutating func sendFromA(_ packet: [UInt8]) -> (WireGuardSendResult, [[UInt8]]) {
        var sink = WireGuardCollectingSink()
        let result = a.send(packet, now: now, into: &sink)
        let out = sink.datagrams.map(\.bytes)
        wireFromA += out.map { (now, $0) }
        return (result, out)
    }

    mutating func sendFromB(_ packet: [UInt8]) -> (WireGuardSendResult, [[UInt8]]) {
        var sink = WireGuardCollectingSink()
        let result = b.send(packet, now: now, into: &sink)
        let out = sink.datagrams.map(\.bytes)
        wireFromB += out.map { (now, $0) }
        return (result, out)
    }

    @discardableResult
    /// Delivers datagrams to B, as sent by `source` when given (the key a transport
    /// authenticated); returns B's results and what B sent in answer.
    mutating func toB(_ datagrams: [[UInt8]], from source: WireGuardPublicKey? = nil) -> ([WireGuardReceiveResult], [[UInt8]]) {
        var sink = WireGuardCollectingSink()
        let results = datagrams.map { b.receive($0, from: source, now: now, into: &sink) }
        deliveredToB += sink.packets.map(\.bytes)
        let out = sink.datagrams.map(\.bytes)
        wireFromB += out.map { (now, $0) }
        return (results, out)
    }

    @discardableResult
    mutating func toA(_ datagrams: [[UInt8]]) -> ([WireGuardReceiveResult], [[UInt8]]) {
        var sink = WireGuardCollectingSink()
        let results = datagrams.map { a.receive($0, now: now, into: &sink) }
        deliveredToA += sink.packets.map(\.bytes)
        let out = sink.datagrams.map(\.bytes)
        wireFromA += out.map { (now, $0) }
        return (results, out)
    }

    /// Shuttles `fromA` to B and every answer back and forth until both are quiet (at most
    /// 20 rounds). Returns every result in order.
    @discardableResult
    mutating func pump(fromA: [[UInt8]] = [], fromB: [[UInt8]] = []) -> [WireGuardReceiveResult] {
        var toBQueue = fromA
        var toAQueue = fromB
        var results: [WireGuardReceiveResult] = []
        for _ in 0..<20 where !toBQueue.isEmpty || !toAQueue.isEmpty {
            let (rb, outB) = toB(deliverFromA ? toBQueue : [])
            let (ra, outA) = toA(deliverFromB ? toAQueue : [])
            results += rb + ra
            toBQueue = outA
            toAQueue = outB
        }
        return results
    }

    /// Runs A's and B's timers at `now`; returns what each sent.
    mutating func tick() -> (fromA: [[UInt8]], fromB: [[UInt8]]) {
        var sinkA = WireGuardCollectingSink()
        var sinkB = WireGuardCollectingSink()
        a.tick(now: now, into: &sinkA)
        b.tick(now: now, into: &sinkB)
        wireFromA += sinkA.datagrams.map { (now, $0.bytes) }
        wireFromB += sinkB.datagrams.map { (now, $0.bytes) }
        return (sinkA.datagrams.map(\.bytes), sinkB.datagrams.map(\.bytes))
    }

    /// Runs both devices' timers in deadline order up to `target` (at most 10,000 firings),
    /// delivering what they send per `deliverFromA` / `deliverFromB`; ends with `now = target`.
    mutating func advance(to target: WireGuardInstant) {
        for _ in 0..<10_000 {
            guard let next = [a.nextDeadline(), b.nextDeadline()].compactMap({ $0 }).min(), next <= target else { break }
            if next > now { now = next }
            let (fromA, fromB) = tick()
            pump(fromA: fromA, fromB: fromB)
        }
        now = target
    }

    /// The datagrams A sent of `type` (1 initiation, 2 response, 4 transport), with times.
    func sentByA(type: UInt8) -> [(at: WireGuardInstant, bytes: [UInt8])] { wireFromA.filter { messageType($0.bytes) == type } }
    func sentByB(type: UInt8) -> [(at: WireGuardInstant, bytes: [UInt8])] { wireFromB.filter { messageType($0.bytes) == type } }

    /// Establishes a session: A sends `first` (queued), the handshake runs, `first` arrives.
    mutating func establish(first: [UInt8]? = nil) {
        let (_, out) = sendFromA(first ?? packet(fromA: true, [1, 2, 3]))
        pump(fromA: out)
    }
}

/// The message type of a datagram (first byte).
func messageType(_ datagram: [UInt8]) -> UInt8 { datagram.first ?? 0 }
