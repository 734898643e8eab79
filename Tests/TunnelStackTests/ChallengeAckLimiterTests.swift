import NIOCore
import Testing

@testable import TunnelStack

/// One challenge ACK per flow per interval, and no more flows remembered than the bound.
struct ChallengeAckLimiterTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func flow(_ port: UInt16) -> TunnelFlow {
        TunnelFlow(remote: TunnelAddress("fd7a:115c:a1e0::1")!, remotePort: port, local: TunnelAddress("fd7a:115c:a1e0::2")!, localPort: 4)
    }

    @Test func aFlowIsAnsweredOncePerInterval() {
        var limiter = ChallengeAckLimiter(interval: .milliseconds(500), capacity: 8)
        func allow(_ port: UInt16, at milliseconds: Int64) -> Bool {
            limiter.allow(flow(port), now: start + .milliseconds(milliseconds))
        }
        #expect(allow(1, at: 0))
        #expect(!allow(1, at: 499))
        // Another flow has its own interval.
        #expect(allow(2, at: 499))
        #expect(allow(1, at: 500))
        #expect(!allow(1, at: 999))
    }

    @Test func whenFullOnlyFlowsPastTheIntervalMakeRoom() {
        var limiter = ChallengeAckLimiter(interval: .milliseconds(500), capacity: 2)
        func allow(_ port: UInt16, at milliseconds: Int64) -> Bool {
            limiter.allow(flow(port), now: start + .milliseconds(milliseconds))
        }
        #expect(allow(1, at: 0))
        #expect(allow(2, at: 300))
        // Full, and both answered within the interval: a third flow waits.
        #expect(!allow(3, at: 400))
        #expect(limiter.count == 2)
        // Flow 1's interval is over: it goes, flow 3 takes its place; flow 2 stays limited.
        #expect(allow(3, at: 600))
        #expect(limiter.count == 2)
        #expect(!allow(2, at: 700))
        #expect(allow(1, at: 800))
        #expect(limiter.count == 2)
    }
}
