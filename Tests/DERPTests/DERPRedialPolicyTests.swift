import Testing

@testable import DERP

/// When the DERP client dials again, on an injected clock: the backoff, what resets it, and
/// a relay's Restarting notice, honoured on a healthy connection and never a way to be
/// redialled at once, forever.
@Suite struct DERPRedialPolicyTests {
    static var configuration: DERPClient.Configuration {
        var configuration = DERPClient.Configuration()
        configuration.backoffFloor = .milliseconds(100)
        configuration.backoffCeiling = .seconds(10)
        configuration.healthyAfter = .seconds(5)
        configuration.maxRestartWait = .seconds(60)
        return configuration
    }

    @Test func failedDialsBackOffAndAHealthyConnectionResets() {
        var policy = DERPRedialPolicy(Self.configuration)
        let now = ContinuousClock.now
        var waits: [Duration] = []
        for _ in 0..<10 { waits.append(policy.dialFailed(now: now)) }
        // ±20 % around 100 ms, 200 ms, ... capped at 10 s.
        #expect(waits[0] >= .milliseconds(80) && waits[0] <= .milliseconds(120), "\(waits)")
        #expect(waits[9] >= .seconds(8) && waits[9] <= .seconds(12), "\(waits)")
        #expect(policy.failures == 10)
        // A connection shorter than healthy is one more failure; a healthy one resets.
        #expect(policy.ended(lived: .seconds(1), restarting: nil, now: now) >= .seconds(8))
        #expect(policy.failures == 11)
        #expect(policy.ended(lived: .seconds(5), restarting: nil, now: now) <= .milliseconds(100))
        #expect(policy.failures == 0)
    }

    @Test func aRestartOnAHealthyConnectionWaitsItsReconnectInThenRedialsQuicklyInItsWindow() {
        var policy = DERPRedialPolicy(Self.configuration)
        let now = ContinuousClock.now
        let first = policy.ended(lived: .seconds(30), restarting: (reconnectIn: .milliseconds(1500), tryFor: .seconds(10)), now: now)
        #expect(first == .milliseconds(1500))
        // Within the window (1.5 s + 10 s) a failed dial waits the floor, however many fail.
        for _ in 0..<5 { #expect(policy.dialFailed(now: now + .seconds(5)) == .milliseconds(100)) }
        // After it, the backoff of the failures counted meanwhile.
        #expect(policy.dialFailed(now: now + .seconds(12)) >= .milliseconds(2560))
        // A relay's own figures are capped.
        var capped = DERPRedialPolicy(Self.configuration)
        #expect(capped.ended(lived: .seconds(30), restarting: (reconnectIn: .seconds(3600), tryFor: .zero), now: now) == .seconds(60))
    }

    /// A relay that says "restarting, reconnect in 0" right after every handshake is backed
    /// off like one that drops us: the waits grow to the ceiling instead of staying 0.
    @Test func aRestartRightAfterEveryHandshakeIsBackedOff() {
        var policy = DERPRedialPolicy(Self.configuration)
        let now = ContinuousClock.now
        var waits: [Duration] = []
        for i in 0..<10 {
            waits.append(policy.ended(lived: .milliseconds(10), restarting: (reconnectIn: .zero, tryFor: .zero), now: now + .seconds(i)))
        }
        #expect(waits.allSatisfy { $0 >= .milliseconds(80) }, "\(waits)")
        #expect(waits[9] >= .seconds(8), "\(waits)")
        // Nor does a short connection's notice open a window of quick redials.
        #expect(policy.dialFailed(now: now + .seconds(10)) >= .seconds(8))
    }
}
