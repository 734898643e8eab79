import DERP
import Testing

/// The frame codec and the handshake's sealed messages, byte for byte.
@Suite struct DERPFrameTests {
    @Test func clientInfoIsTheGoClientsBytes() throws {
        let client = X25519PrivateKey.generate()
        let server = X25519PrivateKey.generate()
        let frame = try #require(DERPHandshake.clientInfo(privateKey: client, serverKey: server.publicKey))
        let bytes = frame.encoded
        // Type 2, length 104 = key 32 + nonce 24 + tag 16 + 32 bytes of JSON.
        #expect(Array(bytes.prefix(5)) == [0x02, 0, 0, 0, 104])
        #expect(bytes.count == 5 + 104)
        #expect(Array(bytes[5..<37]) == client.publicKey.bytes)
        let nonce = Array(bytes[37..<61])
        let json = try #require(
            DERPHandshake.openClientInfo(
                nonce: nonce, sealed: Array(bytes[61...]), clientKey: client.publicKey, serverPrivateKey: server))
        #expect(String(decoding: json, as: UTF8.self) == #"{"version":2,"CanAckPings":true}"#)
        // Another server's key does not open it.
        let other = X25519PrivateKey.generate()
        #expect(DERPHandshake.openClientInfo(nonce: nonce, sealed: Array(bytes[61...]), clientKey: client.publicKey, serverPrivateKey: other) == nil)
    }

    @Test func serverInfoOpensAndToleratesRateLimits() throws {
        let client = X25519PrivateKey.generate()
        let server = X25519PrivateKey.generate()
        let plain = try #require(DERPHandshake.serverInfo(privateKey: server, clientKey: client.publicKey))
        #expect(plain.encoded.count == 5 + 53)
        guard case .serverInfo(let nonce, let sealed) = plain else { Issue.record("not a server info"); return }
        #expect(
            try DERPHandshake.openServerInfo(nonce: nonce, sealed: sealed, privateKey: client, serverKey: server.publicKey)
                == DERPHandshake.ServerInfo(version: 2))
        let limited = try #require(
            DERPHandshake.serverInfo(
                json: #"{"version":2,"TokenBucketBytesPerSecond":1000,"TokenBucketBytesBurst":5000,"future":[1]}"#,
                privateKey: server, clientKey: client.publicKey))
        guard case .serverInfo(let nonce2, let sealed2) = limited else { Issue.record("not a server info"); return }
        let info = try DERPHandshake.openServerInfo(nonce: nonce2, sealed: sealed2, privateKey: client, serverKey: server.publicKey)
        #expect(info.tokenBucketBytesPerSecond == 1000 && info.tokenBucketBytesBurst == 5000)
        // Sealed by someone else: refused.
        #expect(throws: DERPWireError.self) {
            try DERPHandshake.openServerInfo(nonce: nonce, sealed: sealed, privateKey: client, serverKey: X25519PrivateKey.generate().publicKey)
        }
    }

    @Test func everyFrameRoundTrips() throws {
        let key = X25519PrivateKey.generate().publicKey
        let frames: [DERPFrame] = [
            .serverKey(key), .sendPacket(destination: key, packet: [1, 2, 3]), .recvPacket(source: key, packet: []),
            .keepAlive, .notePreferred(true), .notePreferred(false), .peerGone(key, reason: 1), .ping([1, 2, 3, 4, 5, 6, 7, 8]),
            .pong([8, 7, 6, 5, 4, 3, 2, 1]), .health("duplicate"), .health(""),
            .restarting(reconnectInMilliseconds: 1500, tryForMilliseconds: 0x0102_0304), .other(type: 0x7f, payload: [9]),
        ]
        for frame in frames {
            var decoder = DERPFrameDecoder()
            decoder.feed(frame.encoded)
            let raw = try #require(try decoder.next())
            #expect(try DERPFrame(raw) == frame)
            #expect(decoder.bufferedCount == 0)
        }
        #expect(
            DERPFrame.restarting(reconnectInMilliseconds: 1500, tryForMilliseconds: 2).encoded
                == [0x15, 0, 0, 0, 8, 0, 0, 0x05, 0xdc, 0, 0, 0, 2])
        #expect(DERPFrame.notePreferred(true).encoded == [0x07, 0, 0, 0, 1, 1])
    }

    @Test func framesDoNotDependOnTheSplit() throws {
        let key = X25519PrivateKey.generate().publicKey
        let stream =
            DERPFrame.recvPacket(source: key, packet: Array(0..<200)).encoded + DERPFrame.keepAlive.encoded
            + DERPFrame.health("x").encoded
        var whole = DERPFrameDecoder()
        whole.feed(stream)
        var expected: [DERPRawFrame] = []
        while let frame = try whole.next() { expected.append(frame) }
        #expect(expected.count == 3)
        var bytewise = DERPFrameDecoder()
        var got: [DERPRawFrame] = []
        for byte in stream {
            bytewise.feed([byte])
            while let frame = try bytewise.next() { got.append(frame) }
        }
        #expect(got == expected)
        try bytewise.finish()
    }

    @Test func aHeaderOverOneMiBFailsBeforeItsPayload() {
        var decoder = DERPFrameDecoder()
        decoder.feed([0x05, 0x00, 0x10, 0x00, 0x01])  // 1 MiB + 1
        #expect(throws: DERPWireError.frameTooLarge(type: 5, length: (1 << 20) + 1)) { try decoder.next() }
        var exact = DERPFrameDecoder()
        exact.feed([0x05, 0x00, 0x10, 0x00, 0x00])
        #expect((try? exact.next()) == .some(nil))
    }

    @Test func badGreetingsAndShortFrames() {
        let key = X25519PrivateKey.generate().publicKey.bytes
        #expect(throws: DERPWireError.invalidServerGreeting) {
            try DERPFrame(DERPRawFrame(type: 1, payload: DERPProtocol.magic + Array(key.prefix(31))))
        }
        #expect(throws: DERPWireError.invalidServerGreeting) {
            try DERPFrame(DERPRawFrame(type: 1, payload: [0x44, 0x45, 0x52, 0x50, 0xF0, 0x9F, 0x94, 0x92] + key))
        }
        // Longer greetings are fine.
        #expect((try? DERPFrame(DERPRawFrame(type: 1, payload: DERPProtocol.magic + key + [1, 2]))) != nil)
        #expect(throws: DERPWireError.self) { try DERPFrame(DERPRawFrame(type: 5, payload: Array(key.prefix(10)))) }
        #expect(throws: DERPWireError.self) { try DERPFrame(DERPRawFrame(type: 0x15, payload: [0, 0, 1])) }
        #expect((try? DERPFrame(DERPRawFrame(type: 0x42, payload: [1]))) == .other(type: 0x42, payload: [1]))
        var truncated = DERPFrameDecoder()
        truncated.feed([0x05, 0, 0, 0, 40, 1, 2, 3])
        #expect((try? truncated.next()) == .some(nil))
        #expect(throws: DERPWireError.truncated(buffered: 8)) { try truncated.finish() }
    }

    @Test func nodeURLAndDialRules() {
        var node = DERPNode(regionID: 999, hostName: "coder.example.com")
        #expect(node.url == "https://coder.example.com/derp")
        #expect(node.port == 443 && node.dialHosts == ["coder.example.com"] && node.tlsServerName == "coder.example.com")
        node.derpPort = 443
        #expect(node.url == "https://coder.example.com/derp")
        node.derpPort = 8443
        #expect(node.url == "https://coder.example.com:8443/derp")
        node.forceHTTP = true
        node.derpPort = 80
        #expect(node.url == "http://coder.example.com/derp" && node.port == 80)
        node.derpPort = 0
        #expect(node.port == 80)
        node.ipv4 = "127.0.0.1"
        node.ipv6 = "none"
        node.derpPort = 3340
        #expect(node.url == "http://127.0.0.1:3340/derp" && node.dialHosts == ["127.0.0.1"])
        node.ipv4 = "none"
        node.ipv6 = "::1"
        #expect(node.url == "http://coder.example.com:3340/derp" && node.dialHosts == ["::1"])
        node.ipv4 = "10.0.0.1"
        #expect(node.dialHosts == ["10.0.0.1", "::1"])
        node.certName = "derp.internal"
        #expect(node.tlsServerName == "derp.internal")
        #expect(DERPNode(regionID: 1, hostName: "127.0.0.1").tlsServerName == nil)
        #expect(DERPNode(regionID: 1, hostName: "", ipv4: "none", ipv6: "none").dialHosts.isEmpty)
    }
}
