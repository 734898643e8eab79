import Testing
import WireGuard

/// A handshake initiation captured from the real wireguard-go (Debian's 0.0.20220316) with
/// known static keys, replayed into our responder: a repeatable proof of interop.
///
/// How it was made: in a private network namespace, `wireguard-go -f wgkat0`; `wg set wgkat0
/// private-key <initiator key> peer <responder public> allowed-ips fd00::2/128 endpoint
/// 127.0.0.1:51999`; `ip -6 addr add fd00::1/64 dev wgkat0`; a UDP datagram to [fd00::2]:9
/// made it send this initiation to a Python socket on 127.0.0.1:51999. `date +%s` right
/// after printed 1795473768. The keys are the private scalars 10 11 ... 2f (initiator) and
/// 40 41 ... 5f (responder); their public keys came from Python's `cryptography` X25519.
@Suite struct InitiationKATTests {
    static let initiatorPrivate = hexBytes("101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f")
    static let initiatorPublic = "d89e3bad79437dbed9f843418304f460ff05c7fe81fe4a9577a804cb9367ff66"
    static let responderPrivate = hexBytes("404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f")
    static let responderPublic = "79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a"
    static let initiation = hexBytes(
        """
        01000000b93050af2397a610d318fb43f8d7ddf1949b0a6b721f5cc6e54144e8d0dfcea53ce9f50e995d86b4e5f9a4313395a680f1540b37ef09\
        ffb9e8ce9f52fa702941d9f756262a4a99f294eb1c9f875d3f0fba3048e58e142f961b435e7d08072a7d5fcb43813c509ce6685fb330c12c7df9\
        b82165322ff18002c1f86833444c10f900000000000000000000000000000000
        """)

    @Test func ourKeysMatchX25519() throws {
        #expect(try #require(WireGuardPrivateKey(bytes: Self.initiatorPrivate)).publicKey.bytes.hex == Self.initiatorPublic)
        #expect(try #require(WireGuardPrivateKey(bytes: Self.responderPrivate)).publicKey.bytes.hex == Self.responderPublic)
    }

    @Test func responderDecodesWireguardGosInitiation() throws {
        #expect(Self.initiation.count == 148)
        let responder = try #require(WireGuardPrivateKey(bytes: Self.responderPrivate))
        let initiator = try #require(WireGuardPublicKey(bytes: hexBytes(Self.initiatorPublic)))
        var device = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: responder))
        try device.setPeer(WireGuardPeerConfiguration(publicKey: initiator, allowedIPs: [IPPrefix("fd00::1/128")!]))
        var sink = WireGuardCollectingSink()
        let result = device.receive(Self.initiation, now: .seconds(10), into: &sink)
        #expect(result == .initiationAnswered(initiator))
        #expect(sink.datagrams.count == 1 && sink.datagrams[0].bytes.count == 92)
        // The response goes to wireguard-go's sender index.
        #expect(sink.datagrams.first.map { Array($0.bytes[8..<12]) } == Array(Self.initiation[4..<8]))
        let timestamp = try #require(device.status(of: initiator)?.lastInitiationTimestamp)
        #expect(abs(timestamp.unixSeconds - 1_795_473_768) <= 2)
        // wireguard-go whitens the timestamp: the low 24 bits of the nanoseconds are zero.
        #expect(timestamp.nanoseconds & 0xff_ffff == 0)

        // Without the peer configured the same bytes are dropped silently; with another
        // responder key, mac1 fails.
        var stranger = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: responder))
        #expect(stranger.receive(Self.initiation, now: .seconds(10), into: &sink) == .dropped(.unknownKey))
        var other = WireGuardDevice(configuration: WireGuardConfiguration(privateKey: WireGuardPrivateKey.generate()))
        try other.setPeer(WireGuardPeerConfiguration(publicKey: initiator, allowedIPs: []))
        #expect(other.receive(Self.initiation, now: .seconds(10), into: &sink) == .dropped(.badMAC))
    }
}
