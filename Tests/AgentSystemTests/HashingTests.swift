import AgentSystem
import AgentTestSupport
import Foundation
import Testing

struct HashingTests {
    @Test func sha256KnownVectors() {
        #expect(SHA256.hex([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
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

    /// FIPS 180 examples for SHA-1, including the million `a`s fed in uneven pieces.
    @Test func sha1KnownVectors() {
        #expect(SHA256.hexString(SHA1.hash([UInt8]())) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SHA256.hexString(SHA1.hash(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(
            SHA256.hexString(SHA1.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        #expect(
            SHA256.hexString(SHA1.hash([UInt8](repeating: 0x61, count: 1_000_000)))
                == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        // The WebSocket handshake's example (RFC 6455 section 1.3).
        let accept = SHA1.hash(Array("dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11".utf8))
        #expect(Data(accept).base64EncodedString() == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    /// A million `a`s (FIPS 180's long example) in pieces; a copy taken midway hashes on
    /// its own (copy on write), and a finalized hasher starts again empty.
    @Test func sha256IncrementalCopiesAndReuse() {
        var hasher = SHA256()
        let piece = [UInt8](repeating: 0x61, count: 1000)
        for _ in 0..<500 { hasher.update(piece) }
        var copy = hasher
        for _ in 0..<500 { hasher.update(piece) }
        #expect(SHA256.hexString(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(copy.finalize() == SHA256.hash([UInt8](repeating: 0x61, count: 500_000)))
        #expect(hasher.finalize() == SHA256.hash([UInt8]()))
        hasher.update(Array("abc".utf8))
        #expect(SHA256.hexString(hasher.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// libcrypto and coreutils' sha256sum agree, at every length around the block and
    /// padding edges (streamed) and for a file of a few MiB.
    @Test(.ownThreads) func sha256MatchesSha256sum() async throws {
        // Random bytes from a fast generator seeded at random (the system one is slow in a
        // debug build for megabytes).
        var state = UInt64.random(in: 1...UInt64.max)
        func bytes(_ count: Int) -> [UInt8] {
            (0..<count).map { _ in
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                return UInt8(truncatingIfNeeded: state)
            }
        }
        let directory = NSTemporaryDirectory() + "sha256-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for length in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096, (4 << 20) + 5] {
            let data = bytes(length)
            var streamed = SHA256()
            for start in stride(from: 0, to: data.count, by: 61) { streamed.update(data[start..<min(data.count, start + 61)]) }
            #expect(SHA256.hexString(streamed.finalize()) == SHA256.hex(data), "length \(length)")
            let file = directory + "/\(length)"
            try TestFile.write(file, data)
            let sum = await ChildProgram.run(["sha256sum", file]).stdout
            #expect(sum.hasPrefix(SHA256.hex(data) + " "), "length \(length): \(sum)")
        }
    }

    @Test func uuidV5MatchesRFCExample() {
        // RFC 9562 appendix A.4: DNS namespace, "www.example.com".
        let dns: [UInt8] = [0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8]
        #expect(uuidV5(namespace: dns, name: Array("www.example.com".utf8)) == "2ed6657d-e927-568b-95e1-2665a8aea6a2")
    }
}
