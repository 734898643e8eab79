import DERP
import Testing

/// Disco messages: parsing a received one, the Pong a Ping gets, padding, key text.
@Suite struct DiscoTests {
    @Test func pingGetsAPongBetweenTwoDiscoKeys() throws {
        let ours = X25519PrivateKey.generate()
        let theirs = X25519PrivateKey.generate()
        let node = X25519PrivateKey.generate().publicKey
        let txID: [UInt8] = Array(1...12)
        let ping = try #require(Disco.seal(.ping(txID: txID, nodeKey: node), privateKey: theirs, to: ours.publicKey))
        #expect(ping.count == 1310)
        #expect(Disco.looksLikeDisco(ping))
        let received = try Disco.open(ping, privateKey: ours)
        #expect(received.sender == theirs.publicKey)
        #expect(received.message == .ping(txID: txID, nodeKey: node))

        let pong = try #require(Disco.pong(answering: received, privateKey: ours, regionID: 999))
        #expect(pong.count == 1310)
        let answer = try Disco.open(pong, privateKey: theirs)
        #expect(answer.sender == ours.publicKey)
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 3, 3, 40]
        #expect(answer.message == .pong(txID: txID, address: mapped, port: 999))
        // The padding is zeros after TxID, address and port.
        let plain = DiscoMessage.pong(txID: txID, address: mapped, port: 999).encoded
        #expect(plain.count == 2 + 1230 && plain[0] == 2 && plain[1] == 1)
        #expect(plain[32...].allSatisfy { $0 == 0 })
        // Not for us: it does not open.
        #expect(throws: DiscoError.cannotOpen) { try Disco.open(ping, privateKey: X25519PrivateKey.generate()) }
        // A Pong is not answered.
        #expect(Disco.pong(answering: answer, privateKey: theirs, regionID: 1) == nil)
    }

    @Test func precomputedKeysInteroperateWithPlainBoxes() throws {
        let ours = X25519PrivateKey.generate()
        let theirs = X25519PrivateKey.generate()
        let shared = try #require(NaClBox.sharedKey(theirs.publicKey, ours))
        #expect(NaClBox.sharedKey(ours.publicKey, theirs) == shared)
        let ping = DiscoMessage.ping(txID: Array(1...12), nodeKey: nil)
        let sealed = try #require(Disco.seal(ping, shared: shared, ours: ours.publicKey))
        #expect(Disco.sender(of: sealed) == ours.publicKey)
        #expect(try Disco.open(sealed, privateKey: theirs).message == ping)
        let plain = try #require(Disco.seal(ping, privateKey: theirs, to: ours.publicKey))
        #expect(try Disco.open(plain, shared: shared, sender: theirs.publicKey).message == ping)
        // The sender field must be the key the shared key was made with.
        #expect(throws: DiscoError.notDisco) { try Disco.open(plain, shared: shared, sender: ours.publicKey) }
        var tampered = plain
        tampered[tampered.count - 1] ^= 1
        #expect(throws: DiscoError.cannotOpen) { try Disco.open(tampered, shared: shared, sender: theirs.publicKey) }
    }

    @Test func lenientParsing() throws {
        #expect(try DiscoMessage(decoding: [1, 0] + Array(repeating: 7, count: 12)) == .ping(txID: Array(repeating: 7, count: 12), nodeKey: nil))
        #expect(
            try DiscoMessage(decoding: [1, 1] + Array(repeating: 7, count: 12) + Array(repeating: 0, count: 1218))
                == .ping(txID: Array(repeating: 7, count: 12), nodeKey: nil))
        #expect(throws: DiscoError.short) { try DiscoMessage(decoding: [1, 0, 1]) }
        #expect(throws: DiscoError.short) { try DiscoMessage(decoding: [2, 1] + Array(repeating: 0, count: 29)) }
        #expect(throws: DiscoError.unknownType(9)) { try DiscoMessage(decoding: [9, 0]) }
        let endpoint = DiscoEndpoint.ipv4Mapped(10, 0, 0, 1, port: 41641)
        let call = DiscoMessage.callMeMaybe([endpoint])
        #expect(try DiscoMessage(decoding: call.encoded) == call)
        #expect(try DiscoMessage(decoding: [3, 0, 1, 2]) == .callMeMaybe([]))
        #expect(!Disco.looksLikeDisco(Disco.magic + Array(repeating: 0, count: 55)))
        #expect(throws: DiscoError.notDisco) { try Disco.open([4, 0, 0, 0] + Array(repeating: 0, count: 100), privateKey: .generate()) }
    }

    @Test func keyText() {
        let key = X25519PrivateKey.generate().publicKey
        let text = Disco.keyText(key)
        #expect(text.count == 73 && text.hasPrefix("discokey:"))
        #expect(text.dropFirst(9).allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(Disco.key(fromText: text) == key)
        #expect(Disco.key(fromText: "nodekey:" + key.hex) == nil)
    }
}
