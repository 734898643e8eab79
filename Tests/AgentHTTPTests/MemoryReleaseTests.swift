import AgentHTTP
import AgentTestSupport
import Synchronization
import Testing

/// The registry gives the free heap back after a burst of connections has closed: it asks
/// for a trim (counted here through the injected trim function) as the burst closes, and
/// once more near its end, when the last connections' buffers are freed.
@Suite(.timeLimit(.minutes(2)))
struct MemoryReleaseTests {
    /// 20 plain connections and 20 WebSockets (neither kind alone a burst of 32): closing
    /// them asks for a trim at a quarter of the peak and again when at most 2 are left;
    /// small traffic afterwards asks for none. Before, the only trim was asked for at a
    /// quarter, while most of the burst's memory was still in use.
    @Test func aClosedBurstOfBothKindsAsksForTrimsToItsEnd() async throws {
        let requests = Atomic(0)
        let registry = HTTPConnectionRegistry(burstSize: 32) { requests.add(1, ordering: .relaxed) }
        try await withGuardServer(registry: registry) { port, registry in
            var sockets: [LoopbackSocket] = []
            for _ in 0..<20 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                socket.send(String.webSocketHandshake("/ws/burst"))
                let answer = await socket.read(until: "hello", timeout: .seconds(20))
                #expect(String.httpStatus(of: answer) == 101)
                sockets.append(socket)
            }
            for _ in 0..<20 { sockets.append(try #require(await LoopbackSocket.connect(port: port))) }
            #expect(await eventually { registry.count == 40 })
            #expect(requests.load(ordering: .relaxed) == 0)
            sockets.removeAll()
            #expect(await eventually { registry.count == 0 })
            #expect(await eventually { requests.load(ordering: .relaxed) >= 2 })
            let afterBurst = requests.load(ordering: .relaxed)

            // A few connections after the burst: no trim.
            for _ in 0..<8 { sockets.append(try #require(await LoopbackSocket.connect(port: port))) }
            #expect(await eventually { registry.count == 8 })
            sockets.removeAll()
            #expect(await eventually { registry.count == 0 })
            #expect(requests.load(ordering: .relaxed) == afterBurst)
        }
    }
}
