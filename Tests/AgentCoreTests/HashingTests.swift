import AgentCore
import AgentTestSupport
import Foundation
import Testing

struct HashingTests {
    @Test func sha256KnownVectors() {
        #expect(SHA256.hex([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // Incremental updates in odd pieces give the same digest as one update.
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var pieces = SHA256()
        var index = 0
        for size in [1, 63, 64, 65, 1000, 4096] + Array(repeating: 7919, count: 20) where index < data.count {
            let end = min(data.count, index + size)
            data[index..<end].withUnsafeBytes { pieces.update($0) }
            index = end
        }
        data[index...].withUnsafeBytes { pieces.update($0) }
        #expect(SHA256.hexString(pieces.finalize()) == SHA256.hex(data))
    }

    /// The CPU's SHA extensions (where this machine has them), the portable code and
    /// coreutils' sha256sum agree, at every length around the block and padding edges.
    @Test func sha256MatchesThePortableCodeAndSha256sum() async throws {
        print("SHA-256 with the CPU's SHA extensions: \(SHA256.isAccelerated)")
        // Random bytes from a fast generator seeded at random (the system one is slow in a
        // debug build for megabytes).
        var state = UInt64.random(in: 1...UInt64.max)
        func bytes(_ count: Int) -> [UInt8] {
            (0..<count).map { _ in
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                return UInt8(truncatingIfNeeded: state)
            }
        }
        for length in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, (1 << 20) + 13] {
            let data = bytes(length)
            var portable = SHA256(portable: true)
            portable.update(data)
            #expect(SHA256.hexString(portable.finalize()) == SHA256.hex(data), "length \(length)")
        }
        let data = bytes((4 << 20) + 5)
        let file = NSTemporaryDirectory() + "sha256-\(UUID().uuidString)"
        try Data(data).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let sum = await ChildProgram.run(["sha256sum", file]).stdout
        #expect(sum.hasPrefix(SHA256.hex(data) + " "), "\(sum)")
    }

    @Test func uuidV5MatchesRFCExample() {
        // RFC 9562 appendix A.4: DNS namespace, "www.example.com".
        let dns: [UInt8] = [0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8]
        #expect(uuidV5(namespace: dns, name: Array("www.example.com".utf8)) == "2ed6657d-e927-568b-95e1-2665a8aea6a2")
    }
}

struct QuotingTests {
    @Test func goAndJSONQuoting() {
        #expect(goQuote("a\"b\\c\n\u{01}\u{7f}<") == #""a\"b\\c\n\x01\x7f<""#)
        #expect(jsonQuote("<a&b>\u{01}") == #""<a&b>\u0001""#, "HTML characters stay unless asked")
        #expect(jsonQuote("<a&b>\u{2028}", escapingHTML: true) == #""\u003ca\u0026b\u003e\u2028""#)
    }
}
