import DERP
import Testing

/// STUN: the request netcheck sends (byte for byte), responses (RFC 5769's vectors), the
/// demultiplexer's rule, and hostile responses.
@Suite struct STUNTests {
    static let txID: [UInt8] = [0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae]

    static func hex(_ text: String) -> [UInt8] {
        let digits = Array(text.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    @Test func requestIsTheFortyBytesOfNetcheck() {
        let request = STUN.request(txID: Array(1...12))
        // SOFTWARE "tailnode" and FINGERPRINT = CRC-32 of bytes 0–31 (the message before the
        // FINGERPRINT attribute) XOR 0x5354554E: coturn drops a request whose CRC covers more.
        #expect(request == Self.hex("000100142112a4420102030405060708090a0b0c802200087461696c6e6f646580280004b32c370f"))
        #expect(STUN.looksLikeSTUN(request))
    }

    @Test func rfc5769IPv4Response() throws {
        let response = Self.hex(
            """
            0101003c2112a442b7e7a701bc34d686fa87dfae
            8022000b7465737420766563746f7220
            00200008 0001a147e112a643
            000800142b91f599fd9e90c38c7489f92af9ba53f06be7d7
            80280004c07d4c96
            """)
        let parsed = try STUN.parseResponse(response)
        #expect(parsed.txID == Self.txID)
        #expect(parsed.mapped == DiscoEndpoint("192.0.2.1:32853"))
    }

    @Test func rfc5769IPv6Response() throws {
        let response = Self.hex(
            """
            010100482112a442b7e7a701bc34d686fa87dfae
            8022000b7465737420766563746f7220
            00200014 0002a1470113a9faa5d3f179bc25f4b5bed2b9d9
            00080014a382954e4be67bf11784c97c8292c275bfe3ed41
            80280004c8fb0b4c
            """)
        let parsed = try STUN.parseResponse(response)
        #expect(parsed.mapped.description == "[2001:db8:1234:5678:11:2233:4455:6677]:32853")
    }

    @Test func xorMappedWinsOverMappedAndRoundTrips() throws {
        let tx: [UInt8] = Array(repeating: 9, count: 12)
        let mapped = try #require(DiscoEndpoint("203.0.113.7:41641"))
        var response = STUN.response(txID: tx, mapped: mapped)
        #expect(try STUN.parseResponse(response) == STUN.Response(txID: tx, mapped: mapped))
        // A MAPPED-ADDRESS before it (plain form) loses.
        let plain: [UInt8] = [0x00, 0x01, 0x00, 0x08, 0x00, 0x01, 0x00, 0x50, 10, 0, 0, 1]
        response = Array(response[0..<20]) + plain + Array(response[20...])
        response[3] = UInt8(response.count - 20)
        #expect(try STUN.parseResponse(response).mapped == mapped)
        // Alone, MAPPED-ADDRESS is used.
        var only = Array(response[0..<20]) + plain
        only[3] = 12
        #expect(try STUN.parseResponse(only).mapped == DiscoEndpoint("10.0.0.1:80"))
    }

    @Test func hostileResponsesAreErrorsNotCrashes() {
        let good = STUN.response(txID: Array(repeating: 1, count: 12), mapped: DiscoEndpoint("1.2.3.4:5")!)
        #expect(throws: STUN.ParseError.notSTUN) { try STUN.parseResponse(Array(good.prefix(19))) }
        var request = good
        request[1] = 0x01
        request[0] = 0x00
        #expect(throws: STUN.ParseError.notBindingSuccess) { try STUN.parseResponse(request) }
        var long = good
        long[3] = 200
        #expect(throws: STUN.ParseError.truncated) { try STUN.parseResponse(long) }
        var attribute = good
        attribute[23] = 200
        #expect(throws: STUN.ParseError.truncated) { try STUN.parseResponse(attribute) }
        var family = good
        family[25] = 7
        #expect(throws: STUN.ParseError.noMappedAddress) { try STUN.parseResponse(family) }
        #expect(throws: STUN.ParseError.noMappedAddress) { try STUN.parseResponse([0x01, 0x01, 0, 0] + STUN.magicCookie + Array(repeating: 0, count: 12)) }
        // The demultiplexer: top bits, cookie, length.
        #expect(!STUN.looksLikeSTUN([0xC0] + good.dropFirst()))
        #expect(!STUN.looksLikeSTUN([1, 0, 0, 0, 0, 0, 0, 0] + Array(repeating: 0, count: 12)))
        // A WireGuard message never looks like STUN or disco by its first byte.
        #expect(!Disco.looksLikeDisco([4, 0, 0, 0] + Array(repeating: 0x54, count: 60)))
    }

    @Test func endpointText() throws {
        #expect(DiscoEndpoint("203.0.113.7:41641")?.description == "203.0.113.7:41641")
        #expect(DiscoEndpoint("[2001:db8::1]:41641")?.description == "[2001:db8::1]:41641")
        #expect(DiscoEndpoint("[::ffff:1.2.3.4]:1")?.description == "1.2.3.4:1")
        for bad in ["", "1.2.3.4", "1.2.3.4:70000", "[fe80::1%eth0]:1", "::1:2", "host:1", "1.2.3:4", "[1.2.3.4]:5"] {
            #expect(DiscoEndpoint(bad) == nil, "\(bad)")
        }
        let v4 = try #require(DiscoEndpoint("10.1.2.3:1"))
        #expect(v4.isIPv4 && v4.isPrivate && !v4.isLoopback)
        #expect(DiscoEndpoint("127.0.0.1:1")!.isLoopback)
        #expect(DiscoEndpoint("[::1]:1")!.isLoopback)
        #expect(DiscoEndpoint("169.254.1.1:1")!.isLinkLocal)
        #expect(DiscoEndpoint("[fe80::1]:1")!.isLinkLocal)
        #expect(DiscoEndpoint("[fd00::1]:1")!.isUniqueLocal)
        #expect(DiscoEndpoint("[fd60:627a:a42b::1]:1")!.isCoderServiceAddress)
        #expect(DiscoEndpoint("172.31.0.1:1")!.isPrivate && !DiscoEndpoint("172.32.0.1:1")!.isPrivate)
    }
}
