import AgentCore
import Synchronization
import Testing

/// The registry both local listeners share: idle connections make room first; when all are
/// busy, the agent socket refuses and the boundary socket closes the longest-busy one.
@Suite struct LocalConnectionRegistryTests {
    /// Which connections were closed, by name.
    final class Closed: Sendable {
        private let names = Mutex<[String]>([])
        func closer(_ name: String) -> @Sendable () -> Void { { self.names.withLock { $0.append(name) } } }
        var all: [String] { names.withLock { $0 } }
    }

    @Test func theLongestIdleMakesRoomAndBusyOnesStay() throws {
        let closed = Closed()
        let counts = Mutex<[Int]>([])
        let registry = LocalConnectionRegistry(maxConnections: 2, whenAllBusy: .refuse, onCount: { n in counts.withLock { $0.append(n) } })
        let a = try #require(registry.admit(close: closed.closer("a")))
        let b = try #require(registry.admit(close: closed.closer("b")))
        registry.touch(a.id, busy: true)
        // b is idle, a busy: the newcomer closes b although a was quiet longer.
        let c = try #require(registry.admit(close: closed.closer("c")))
        #expect(c.evicted && closed.all == ["b"])
        registry.touch(c.id, busy: true)
        // Both busy: refused, nothing closed.
        #expect(registry.admit(close: closed.closer("d")) == nil)
        #expect(closed.all == ["b"] && registry.busyCount == 2 && registry.evictedCount == 1)
        registry.touch(a.id, busy: false)
        registry.remove(c.id)
        #expect(registry.count == 1)
        registry.closeAll()
        #expect(closed.all == ["b", "a"] && registry.isClosed && registry.count == 0)
        #expect(registry.admit(close: closed.closer("e")) == nil)
        #expect(counts.withLock { $0 } == [1, 2, 2, 1, 0])
        _ = b
    }

    @Test func whenAllAreBusyTheLongestBusyIsClosed() throws {
        let closed = Closed()
        let registry = LocalConnectionRegistry(maxConnections: 2, whenAllBusy: .closeLongestBusy)
        let a = try #require(registry.admit(close: closed.closer("a")))
        let b = try #require(registry.admit(close: closed.closer("b")))
        registry.touch(b.id, busy: true)
        registry.touch(a.id, busy: true)
        // Still busy: b keeps the time it became busy, before a.
        registry.touch(b.id, busy: true)
        let c = try #require(registry.admit(close: closed.closer("c")))
        #expect(c.evicted && closed.all == ["b"])
        _ = a
    }
}
