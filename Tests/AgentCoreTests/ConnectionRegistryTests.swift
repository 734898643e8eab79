import AgentCore
import Synchronization
import Testing

/// The shared registry's stream budget, drain and burst release, as pure state.
struct ConnectionRegistryTests {
    typealias Closed = LocalConnectionRegistryTests.Closed

    @Test func aStreamLeavesTheCapForItsOwnBudget() throws {
        let closed = Closed()
        let registry = ConnectionRegistry(maxConnections: 1, maxStreams: 1, whenAllBusy: .refuse)
        guard case .admitted(let a, false) = registry.register(close: closed.closer("a")) else { Issue.record("a refused"); return }
        #expect(registry.reserveStream())
        #expect(!registry.reserveStream(), "one stream slot")
        #expect(registry.streamCounters == (open: 1, refused: 1))
        registry.setPhase(a, .stream)
        guard case .admitted = registry.register(close: closed.closer("b")) else { Issue.record("b refused"); return }
        #expect(registry.count == 2 && closed.all.isEmpty, "the stream is not evicted and does not count")
        registry.releaseStream()
        #expect(registry.streamCounters.open == 0)
    }

    @Test func drainingClosesIdleNowAndBusyWhenIdle() {
        let closed = Closed()
        let registry = ConnectionRegistry(maxConnections: 4, whenAllBusy: .refuse)
        guard case .admitted(let a, _) = registry.register(close: closed.closer("a")),
            case .admitted(let b, _) = registry.register(close: closed.closer("b"))
        else { Issue.record("refused"); return }
        registry.setPhase(b, .busy(since: ConnectionRegistry.uptimeNanoseconds()))
        registry.stopAccepting()
        #expect(closed.all == ["a"])
        guard case .draining = registry.register(close: closed.closer("c")) else { Issue.record("not draining"); return }
        #expect(registry.setPhase(b, .idle(since: ConnectionRegistry.uptimeNanoseconds())), "b is to close once idle")
        #expect(registry.count == 0 && registry.counters.refused == 1)
        _ = a
    }

    @Test func memoryIsGivenBackAfterABurst() {
        let releases = Atomic(0)
        let registry = ConnectionRegistry(maxConnections: 64, whenAllBusy: .refuse, burstSize: 16) { releases.add(1, ordering: .relaxed) }
        var ids: [UInt64] = []
        for _ in 0..<16 { if let (id, _) = registry.admit(close: {}) { ids.append(id) } }
        for id in ids.prefix(11) { registry.remove(id) }
        #expect(releases.load(ordering: .relaxed) == 0, "more than a quarter still open")
        registry.remove(ids[11])
        #expect(releases.load(ordering: .relaxed) == 1)
    }
}

struct PartialFrameDeadlineTests {
    /// Armed at a frame's first byte, not again while it trickles, cancelled at its end.
    @Test func armsOncePerFrame() {
        var deadline = PartialFrameDeadline()
        #expect(deadline.afterRead(midFrame: false) == .none)
        #expect(deadline.afterRead(midFrame: true) == .arm)
        #expect(deadline.afterRead(midFrame: true) == .none, "more bytes of the same frame do not re-arm it")
        #expect(deadline.isMidFrame)
        #expect(deadline.afterRead(midFrame: false) == .cancel)
        #expect(deadline.afterRead(midFrame: true) == .arm)
        #expect(deadline.afterRead(midFrame: true, endedAFrame: true) == .arm, "a frame ended and the next began: its own deadline")
        #expect(deadline.afterRead(midFrame: true) == .none)
        #expect(deadline.afterRead(midFrame: false, endedAFrame: true) == .cancel)
        #expect(deadline.afterRead(midFrame: false, endedAFrame: true) == .none)
    }
}
