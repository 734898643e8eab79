import AgentHTTP
import AgentTestSupport
import Foundation
import Testing

/// Seeded mutations of valid requests and WebSocket traffic, each on its own
/// connection, against a real server. The server must answer or close every one (never
/// hang or crash) and still serve `/healthz` afterwards. Bounded: 400 cases, 2 s each.
@Suite struct HostileInputFuzzTests {
    static let seeds: [String] = [
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{\"command\":\"fuzz\"}\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 20\r\n\r\n{\"command\":\"fuzz\"}\n",
        String.webSocketHandshake("/ws/one"),
        String.webSocketHandshake("/ws/one", headers: "Sec-WebSocket-Extensions: permessage-deflate\r\n"),
        "GET /healthz HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        "CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n",
    ]

    /// A masked WebSocket text frame, to follow a handshake.
    static let frame: [UInt8] = [0x81, 0x85, 1, 2, 3, 4] + Array("hello".utf8).enumerated().map { $0.element ^ UInt8($0.offset % 4 + 1) }

    @Test func mutatedRequestsNeverHangOrCrashTheServer() async throws {
        try await withGuardServer(headTimeout: .seconds(1), bodyTimeout: .seconds(1)) { port, registry in
            var random = SplitMix64(seed: 0x5EED_0007)
            for round in 0..<400 {
                var bytes = Array(Self.seeds[Int(random.next() % UInt64(Self.seeds.count))].utf8)
                if bytes.starts(with: Array("GET /ws".utf8)) { bytes += Self.frame }
                Self.mutate(&bytes, &random)
                guard let socket = await LoopbackSocket.connect(port: port) else {
                    Issue.record("connection \(round) refused")
                    continue
                }
                socket.send(bytes)
                if random.next() % 4 == 0 { continue }  // vanish without reading
                // Either an answer or a close; a WebSocket may stay open, which is fine.
                _ = await socket.readAll(timeout: .milliseconds(20))
            }
            // Still answering (a loaded host may still be closing the fuzz connections, which
            // hold slots: a first try may be refused).
            #expect(
                await eventually(timeout: .seconds(60)) {
                    (try? await RawHTTPClient(port: port).request("GET", "/healthz", timeout: .seconds(20)))?.status == 200
                })
            // Every fuzz connection is closed by the deadlines (1 s) or by the client.
            #expect(await eventually(timeout: .seconds(20)) { registry.count <= 1 })
        }
    }

    /// Flips, inserts, deletes, truncates or duplicates a few bytes.
    static func mutate(_ bytes: inout [UInt8], _ random: inout SplitMix64) {
        for _ in 0..<Int(random.next() % 4) {
            guard !bytes.isEmpty else { return }
            let at = Int(random.next() % UInt64(bytes.count))
            switch random.next() % 5 {
            case 0: bytes[at] ^= UInt8(truncatingIfNeeded: 1 << (random.next() % 8))
            case 1: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
            case 2: bytes.remove(at: at)
            case 3: bytes.removeSubrange(at...)
            default: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 16)], at: at)
            }
        }
    }
}
