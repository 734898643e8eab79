import AgentCore
import AgentHTTP
import AgentTestSupport
import Foundation
import NIOPosix
import Testing

/// Idle WebSockets and stalled downloads cannot use up the connection cap.
@Suite(.timeLimit(.minutes(2)))
struct ConnectionBudgetTests {
    static let ping: [UInt8] = [0x89, 0x00]
    static let goingAway: [UInt8] = [0x88, 0x02, 0x03, 0xE9]

    /// What came after the 101's head (frames: the greeting, and on a loaded machine perhaps
    /// a ping or a close ahead of it).
    static func frames(after upgrade: [UInt8]) -> [UInt8] {
        guard let head = upgrade.firstRange(of: Array("\r\n\r\n".utf8)) else { return [] }
        return Array(upgrade[head.upperBound...])
    }

    /// The handshake's answer; `bytes` may run past the greeting (a ping that came along).
    static func upgrade(_ socket: LoopbackSocket, _ path: String = "/ws/one") async -> (status: Int?, text: String, bytes: [UInt8]) {
        socket.send(String.webSocketHandshake(path))
        let bytes = await socket.read(until: "hello", timeout: .seconds(20))
        return (String.httpStatus(of: bytes), String(decoding: bytes, as: UTF8.self), bytes)
    }

    /// Upgraded connections have their own budget (here 6): handshakes beyond it are
    /// refused with 503, and plain requests still get in. Before, every slot could be a
    /// WebSocket and new requests were refused.
    @Test func webSocketsCannotStarvePlainRequests() async throws {
        try await withGuardServer(maxConnections: 8, maxWebSockets: 6) { port, registry in
            #expect(registry.maxWebSockets == 6)
            var open: [LoopbackSocket] = []
            for _ in 0..<6 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                #expect(await Self.upgrade(socket).status == 101)
                open.append(socket)
            }
            for _ in 0..<2 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                let answer = await Self.upgrade(socket)
                #expect(answer.status == 503)
                #expect(answer.text.contains("Too many WebSocket connections."))
                #expect(await socket.isClosedByPeer(within: .seconds(10)))
            }
            #expect(registry.webSocketCounters == (open: 6, refused: 2))
            let health = try await RawHTTPClient(port: port).request("GET", "/healthz")
            #expect(health.status == 200, "plain requests keep their share")
            // A WebSocket that closes gives its slot back.
            open[0].send([0x88, 0x80, 1, 2, 3, 4])  // masked close
            #expect(await open[0].isClosedByPeer(within: .seconds(10)))
            #expect(await eventually { registry.webSocketCounters.open == 5 })
            let again = try #require(await LoopbackSocket.connect(port: port))
            #expect(await Self.upgrade(again).status == 101)
        }
    }

    /// WebSockets do not count against the connection cap: with the stream budget full and
    /// as many plain requests in progress as WebSockets open, a plain request still gets
    /// 200 (before, the two shared the cap, every connection was busy, and the new one was
    /// reset), and one more handshake gets a JSON 503 rather than a reset.
    @Test func aPlainRequestGetsInWithTheStreamBudgetFull() async throws {
        try await withGuardServer(maxConnections: 8, maxWebSockets: 4) { port, registry in
            var open: [LoopbackSocket] = []
            for _ in 0..<4 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                #expect(await Self.upgrade(socket).status == 101)
                open.append(socket)
            }
            // Four slow plain requests: busy connections, which cannot be evicted.
            for _ in 0..<4 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                socket.send("GET /slower HTTP/1.1\r\nHost: x\r\n\r\n")
                open.append(socket)
            }
            #expect(await eventually { registry.busyCount == 4 })
            let health = try await RawHTTPClient(port: port).request("GET", "/healthz")
            #expect(health.status == 200, "a plain request gets in")
            let refused = try #require(await LoopbackSocket.connect(port: port))
            let answer = await Self.upgrade(refused)
            #expect(answer.status == 503, "\(answer.text)")
            #expect(answer.text.contains("Too many WebSocket connections."))
            #expect(answer.text.contains("\"detail\""))
            #expect(registry.webSocketCounters.open == 4)
        }
    }

    /// A handshake the route refuses (404 from its check) takes no WebSocket slot.
    @Test func aRefusedHandshakeHoldsNoSlot() async throws {
        try await withGuardServer(maxConnections: 8) { port, registry in
            for _ in 0..<10 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                socket.send(String.webSocketHandshake("/ws/refused"))
                #expect(String.httpStatus(of: await socket.read(until: "}\n")) == 404)
            }
            #expect(registry.webSocketCounters == (open: 0, refused: 0))
        }
    }

    /// A peer that answers nothing is pinged after one interval and sent a close frame
    /// (1001) and disconnected after another (before: held until the peer went away).
    @Test func aSilentWebSocketPeerIsPingedThenClosed() async throws {
        try await withGuardServer(webSocketPingInterval: .seconds(1)) { port, registry in
            let socket = try #require(await LoopbackSocket.connect(port: port))
            let upgrade = await Self.upgrade(socket)
            #expect(upgrade.status == 101, "\(upgrade.text)")
            let (rest, closed) = await socket.readAll(timeout: .seconds(20))
            let bytes = Self.frames(after: upgrade.bytes) + rest
            #expect(bytes.firstRange(of: Self.ping) != nil, "pinged: \(bytes)")
            #expect(bytes.firstRange(of: Self.goingAway) != nil, "close frame 1001: \(bytes)")
            #expect(closed)
            #expect(await eventually { registry.count == 0 && registry.webSocketCounters.open == 0 })
        }
    }

    /// A peer that answers each ping (its pong is all it sends) stays connected.
    @Test func aWebSocketPeerThatAnswersPingsStays() async throws {
        // Ten seconds between pings: on a loaded 2-core machine (load 10) a pong sent at once
        // was seen to reach the server's check after two seconds, and with four seconds a
        // full `make test` once saw the peer closed after answering the first ping.
        try await withGuardServer(webSocketPingInterval: .seconds(10)) { port, _ in
            // The client runs on a thread of its own: on a loaded machine a test's task was
            // seen to wait longer than two intervals for a cooperative thread, and the server
            // rightly closed a peer that had not answered.
            let seen = await onThread { () -> (all: [UInt8], pings: Int, alive: Bool) in
                guard let socket = LoopbackSocket(port: port) else { return ([], 0, false) }
                socket.send(String.webSocketHandshake("/ws/one"))
                // Every ping is answered as soon as it is read, as a real client's library
                // does (the route's greeting may come after a ping when its task waits for a
                // thread); bounded in rounds and time.
                var all: [UInt8] = []
                var pings = 0
                for _ in 0..<50 where pings < 2 {
                    let (bytes, closed) = socket.readBlocking(until: Self.ping, timeout: .seconds(40))
                    all += bytes
                    var rest = bytes[...]
                    while let found = rest.firstRange(of: Self.ping) {
                        pings += 1
                        socket.send([0x8A, 0x80, 9, 8, 7, 6])  // a masked pong without payload
                        rest = rest[found.upperBound...]
                    }
                    if closed || all.firstRange(of: Self.goingAway) != nil { break }
                }
                let alive = !socket.readBlocking(until: Self.goingAway, timeout: .milliseconds(100)).closed
                return (all, pings, alive)
            }
            #expect(String.httpStatus(of: seen.all) == 101)
            #expect(seen.pings >= 2, "\(seen.all)")
            #expect(seen.all.firstRange(of: Self.goingAway) == nil, "closed: \(seen.all)")
            #expect(seen.alive)
        }
    }

    /// A WebSocket whose client reads nothing is closed once no write progress was made for
    /// the write-stall time, like a download: its messages had waited in their writer with
    /// no deadline (until the idle ping, a minute later, when the client also said nothing,
    /// and for ever when it kept sending).
    @Test func aStalledWebSocketIsClosed() async throws {
        try await withGuardServer(writeStallTimeout: .milliseconds(300)) { port, registry in
            let stalled = try #require(await LoopbackSocket.connect(port: port))
            stalled.setReceiveBuffer(4096)
            #expect(
                stalled.send(
                    "GET /flood HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
            #expect(String(decoding: await stalled.read(until: "\r\n\r\n", timeout: .seconds(20)), as: UTF8.self).hasPrefix("HTTP/1.1 101"))
            #expect(await eventually(timeout: .seconds(20)) { registry.count == 0 }, "the connection was closed")
        }
    }

    /// A large answer written at once to a client that reads it slowly but steadily is not cut:
    /// the write-stall time bounds a socket that takes nothing, not the drain of an answer;
    /// nor does the next request's deadline (keep-alive) or the linger (`Connection: close`)
    /// run before the answer went out (both did: the answer was handed over at once, and its
    /// rest was dropped when they fired). 64 MiB, far past the kernel's buffers, read on a
    /// thread of its own with a 20 ms pause every 128 KiB: over 10 s of draining, against a
    /// 5 s write-stall time that a loaded host's scheduling does not come near between two
    /// reads, a 5 s head time (which the request itself must meet: 2 s was missed in a loaded
    /// run) and the 2 s linger.
    @Test(arguments: [false, true]) func aSlowButReadingClientGetsALargeAnswerWhole(closes: Bool) async throws {
        try await withGuardServer(headTimeout: .seconds(5), writeStallTimeout: .seconds(5)) { port, _ in
            let slow = try #require(await LoopbackSocket.connect(port: port))
            let size = 64 << 20
            let close = closes ? "Connection: close\r\n" : ""
            #expect(slow.send("GET /blob?size=\(size) HTTP/1.1\r\nHost: x\r\n\(close)\r\n"))
            let received = await Self.readSlowly(slow, upTo: size, pausingEvery: 128 << 10)
            #expect(received >= size, "\(received) bytes before the connection ended")
        }
    }

    /// A loop held up past the write-stall time does not close a client that reads: the loop
    /// runs the overdue wake-up before it polls the socket again, and that look finds nothing
    /// gone since the one before (before: the answer was cut there). The server has a loop
    /// of its own. Against a 2 s write-stall time, the client starts reading a 32 MiB answer
    /// (far past the kernel's buffers) after 1 s; the route holds the loop from 500 ms to
    /// 4.5 s, so the looks before the hold found nothing gone either.
    @Test func aLoopHeldUpDoesNotCloseAReadingClient() async throws {
        try await withGuardServer(writeStallTimeout: .seconds(2), eventLoopGroup: Self.loopOfItsOwn) { port, registry in
            let client = try #require(await LoopbackSocket.connect(port: port))
            let size = 32 << 20
            #expect(client.send("GET /blob-then-hold?size=\(size)&after=500&hold=4000 HTTP/1.1\r\nHost: x\r\n\r\n"))
            let received = await Self.readSlowly(client, upTo: size, pausingEvery: 256 << 10, after: .seconds(1))
            #expect(received >= size, "\(received) bytes before the connection ended")
            #expect(registry.count == 1, "the connection stays open")
        }
    }

    /// One loop, never shut down (``EventLoopTaskExecutor`` runs on it): the test above holds
    /// it up without stalling other tests' connections.
    private static let loopOfItsOwn = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// Reads `size` bytes (headers included) on a thread of its own, from `after` on, pausing
    /// 20 ms after each `pace` bytes, until the connection ends; bounded: at most 100 000
    /// reads, each waiting at most 30 s.
    private static func readSlowly(
        _ socket: LoopbackSocket, upTo size: Int, pausingEvery pace: Int, after: Duration = .zero
    ) async -> Int {
        let fd = socket.fd
        let wait = UInt32(after.components.seconds * 1_000_000)
        return await onThread { () -> Int in
            usleep(wait)
            var total = 0
            var paced = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            for _ in 0..<100_000 where total < size {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 30_000) > 0 else { break }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n < 0, errno == EAGAIN || errno == EINTR { continue }
                if n <= 0 { break }
                total += n
                if total - paced >= pace {
                    paced = total
                    usleep(20_000)
                }
            }
            return total
        }
    }

    /// A download whose client reads nothing is closed once no write progress was made for
    /// the write-stall time (before: held forever, with its buffers). (Clients that read are
    /// covered by the responder tests' large bodies, under the default 30 s.)
    @Test func aStalledDownloadIsClosed() async throws {
        try await withGuardServer(writeStallTimeout: .milliseconds(300)) { port, registry in
            let stalled = try #require(await LoopbackSocket.connect(port: port))
            stalled.setReceiveBuffer(4096)
            #expect(stalled.send("GET /big?size=\(256 << 20) HTTP/1.1\r\nHost: x\r\n\r\n"))
            // The answer has begun (the connection is served), then the client reads no more.
            #expect(await !stalled.read(atLeast: 1, timeout: .seconds(20)).isEmpty)
            // A connection leaves the registry when its channel closes (before the deadline it
            // stayed open as long as the client did).
            #expect(await eventually(timeout: .seconds(20)) { registry.count == 0 }, "the connection was closed")
        }
    }
}
