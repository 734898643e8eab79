import CTailnetCrypto
import Testing

/// Known-answer tests of every primitive WireGuard (and DERP) uses, through CTailnetCrypto.
@Suite struct PrimitiveTests {
    static let ladies = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)

    @Test func blake2sMatchesRFC7693AppendixB() {
        var out = [UInt8](repeating: 0, count: 32)
        let abc = Array("abc".utf8)
        #expect(tc_blake2s256(&out, abc, 3, nil, 0, nil, 0) == 0)
        #expect(out.hex == "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982")
        // The same bytes split over the three parts.
        var split = [UInt8](repeating: 0, count: 32)
        #expect(tc_blake2s256(&split, [0x61], 1, [0x62], 1, [0x63], 1) == 0)
        #expect(split == out)
    }

    /// The first entries of the official blake2s-kat.txt (key 00 01 ... 1f, input 00 01 ... n-1).
    @Test(arguments: [
        (0, "48a8997da407876b3d79c0d92325ad3b89cbb754d86ab71aee047ad345fd2c49"),
        (1, "40d15fee7c328830166ac3f918650f807e7e01e177258cdc0a39b11f598066f1"),
        (2, "6bb71300644cd3991b26ccd4d274acd1adeab8b1d7914546c1198bbe9fc9d803"),
    ])
    func keyedBlake2sMatchesTheOfficialKAT(length: Int, expected: String) {
        let key = (0..<32).map { UInt8($0) }
        let input = (0..<length).map { UInt8($0) }
        var out = [UInt8](repeating: 0, count: 32)
        #expect(tc_blake2s_mac(&out, 32, key, 32, input, input.count) == 0)
        #expect(out.hex == expected)
    }

    /// Made with Python 3: `hmac.new(key, message, hashlib.blake2s).hexdigest()` (the
    /// standard library's HMAC over its BLAKE2s-256, 64-byte blocks).
    @Test(arguments: [
        (
            "6b6579", "54686520717569636b2062726f776e20666f78206a756d7073206f76657220746865206c617a7920646f67",
            "f93215bb90d4af4c3061cd932fb169fb8bb8a91d0b4022baea1271e1323cd9a0"
        ),
        (
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "",
            "e2641d24dfa8dd89e8cb77f1cdc77d8c006e5bebdfc4d6a3a3a6f8d5b7586fb0"
        ),
        (
            String(repeating: "aa", count: 80),
            "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
            "41202b7be1fd03f84658f4c18a08b43ddbbd73eb012750c8d1ebc8601f1e064c"
        ),
    ])
    func hmacBlake2sMatchesPython(key: String, message: String, expected: String) {
        let k = hexBytes(key)
        let m = hexBytes(message)
        var out = [UInt8](repeating: 0, count: 32)
        #expect(tc_hmac_blake2s(&out, k, k.count, m, m.count, nil, 0) == 0)
        #expect(out.hex == expected)
        // Split input gives the same MAC.
        if m.count > 3 {
            var split = [UInt8](repeating: 0, count: 32)
            #expect(tc_hmac_blake2s(&split, k, k.count, Array(m[0..<3]), 3, Array(m[3...]), m.count - 3) == 0)
            #expect(split == out)
        }
    }

    @Test func chachaPolyMatchesRFC8439Section282() {
        let key = (0x80..<0xa0).map { UInt8($0) }
        let nonce = hexBytes("070000004041424344454647")
        let ad = hexBytes("50515253c0c1c2c3c4c5c6c7")
        let expected = """
            d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b\
            1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
            3ff4def08e4b7a9de576d26586cec64b6116\
            1ae10b594f09e26a7e902ecbd0600691
            """
        var sealed = [UInt8](repeating: 0, count: Self.ladies.count + 16)
        #expect(tc_chacha_seal(&sealed, Self.ladies, Self.ladies.count, ad, ad.count, nonce, key) == 0)
        #expect(sealed.hex == expected)
        var opened = [UInt8](repeating: 0, count: Self.ladies.count)
        #expect(tc_chacha_open(&opened, sealed, sealed.count, ad, ad.count, nonce, key) == 0)
        #expect(opened == Self.ladies)
        sealed[5] ^= 1
        #expect(tc_chacha_open(&opened, sealed, sealed.count, ad, ad.count, nonce, key) == -1)
    }

    @Test func xchachaPolyMatchesDraftIrtfCfrgXchachaA31() {
        let key = (0x80..<0xa0).map { UInt8($0) }
        let nonce = hexBytes("404142434445464748494a4b4c4d4e4f5051525354555657")
        let ad = hexBytes("50515253c0c1c2c3c4c5c6c7")
        let expected = """
            bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39\
            ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9\
            21f9664c97637da9768812f615c68b13b52e\
            c0875924c1c7987947deafd8780acf49
            """
        var sealed = [UInt8](repeating: 0, count: Self.ladies.count + 16)
        #expect(tc_xchacha_seal(&sealed, Self.ladies, Self.ladies.count, ad, ad.count, nonce, key) == 0)
        #expect(sealed.hex == expected)
        var opened = [UInt8](repeating: 0, count: Self.ladies.count)
        #expect(tc_xchacha_open(&opened, sealed, sealed.count, ad, ad.count, nonce, key) == 0)
        #expect(opened == Self.ladies)
        sealed[sealed.count - 1] ^= 0x80
        #expect(tc_xchacha_open(&opened, sealed, sealed.count, ad, ad.count, nonce, key) == -1)
    }

    /// RFC 7748 §5.2: the two single-step vectors (the scalar is clamped by X25519).
    @Test(arguments: [
        (
            "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
            "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
            "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"
        ),
        (
            "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
            "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
            "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"
        ),
    ])
    func x25519MatchesRFC7748Section52(scalar: String, u: String, expected: String) {
        var out = [UInt8](repeating: 0, count: 32)
        #expect(tc_x25519(&out, hexBytes(scalar), hexBytes(u)) == 0)
        #expect(out.hex == expected)
    }

    /// RFC 7748 §6.1: Alice's and Bob's key pairs and their shared secret.
    @Test func x25519MatchesRFC7748Section61() {
        let alicePrivate = hexBytes("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        let bobPrivate = hexBytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
        var alicePublic = [UInt8](repeating: 0, count: 32)
        var bobPublic = [UInt8](repeating: 0, count: 32)
        #expect(tc_x25519_public(&alicePublic, alicePrivate) == 0)
        #expect(tc_x25519_public(&bobPublic, bobPrivate) == 0)
        #expect(alicePublic.hex == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(bobPublic.hex == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        var shared1 = [UInt8](repeating: 0, count: 32)
        var shared2 = [UInt8](repeating: 0, count: 32)
        #expect(tc_x25519(&shared1, alicePrivate, bobPublic) == 0)
        #expect(tc_x25519(&shared2, bobPrivate, alicePublic) == 0)
        #expect(shared1.hex == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(shared2 == shared1)
        // A low-order point (all zeros) gives no shared secret.
        #expect(tc_x25519(&shared1, alicePrivate, [UInt8](repeating: 0, count: 32)) == -1)
    }

    /// NaCl's classic box vector (tests/box.c of the NaCl distribution, as in libsodium's
    /// test/default/box.c and box.exp): alicesk, bobpk, the nonce and the 131-byte message;
    /// crypto_box_easy's output is the tag followed by the ciphertext.
    @Test func naclBoxMatchesTheClassicVector() {
        let aliceSecret = hexBytes("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        let bobPublic = hexBytes("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let bobSecret = hexBytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
        let alicePublic = hexBytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        let nonce = hexBytes("69696ee955b62b73cd62bda875fc73d68219e0036b7a0b37")
        let message = hexBytes(
            """
            be075fc53c81f2d5cf141316ebeb0c7b5228c52a4c62cbd44b66849b64244ffce5ecbaaf33bd751a1ac728d45e6c6129\
            6cdc3c01233561f41db66cce314adb310e3be8250c46f06dceea3a7fa1348057e2f6556ad6b1318a024a838f21af1fde\
            048977eb48f59ffd4924ca1c60902e52f0a089bc76897040e082f937763848645e0705
            """)
        #expect(message.count == 131)
        let expected = """
            f3ffc7703f9400e52a7dfb4b3d3305d98e993b9f48681273c29650ba32fc76ce48332ea7164d96a4476fb8c531a1186a\
            c0dfc17c98dce87b4da7f011ec48c97271d2c20f9b928fe2270d6fb863d51738b48eeee314a7cc8ab932164548e526ae\
            90224368517acfeabd6bb3732bc0e9da99832b61ca01b6de56244a9e88d5f9b37973f622a43d14a6599b1f654cb45a74\
            e355a5
            """
        var boxed = [UInt8](repeating: 0, count: message.count + 16)
        #expect(tc_box_seal(&boxed, message, message.count, nonce, bobPublic, aliceSecret) == 0)
        #expect(boxed.hex == expected)
        var opened = [UInt8](repeating: 0, count: message.count)
        #expect(tc_box_open(&opened, boxed, boxed.count, nonce, alicePublic, bobSecret) == 0)
        #expect(opened == message)
        boxed[0] ^= 1
        #expect(tc_box_open(&opened, boxed, boxed.count, nonce, alicePublic, bobSecret) == -1)
    }
}
