import CDesktop
import Testing

/// The deadline rule of one call on the agent's VNC connection (`desktop_vnc_deadline_passed`),
/// driven by hand: the clock and the socket's byte counter are what each step says. A call
/// may go the timeout with no byte moving, and may last the timeout plus what its bytes take
/// at the floor rate. Before, a call failed once it had lasted the timeout, so a message that
/// took longer to arrive whole, however steadily, dropped the connection.
@Suite struct VNCProgressDeadlineTests {
    /// 10 s of silence, 64 KiB/s: the client's defaults.
    static let timeout: Int32 = 10_000
    static let floor: Int32 = 64 * 1024

    /// A deadline begun at 0 ms with the counter at `counter`.
    static func begun(counter: UInt64 = 0, timeout: Int32 = VNCProgressDeadlineTests.timeout, floor: Int32 = VNCProgressDeadlineTests.floor) -> desktop_vnc_deadline {
        var deadline = desktop_vnc_deadline()
        desktop_vnc_deadline_begin(&deadline, timeout, floor, 0, counter)
        return deadline
    }

    /// Samples `deadline` every `step` ms from `from` to `to` (inclusive), the counter given by
    /// `counter(ms)`; returns the first instant it passed, or nil.
    static func firstPassed(_ deadline: inout desktop_vnc_deadline, from: Int64, to: Int64, step: Int64, counter: (Int64) -> UInt64) -> Int64? {
        var now = from
        while now <= to {
            if desktop_vnc_deadline_passed(&deadline, now, counter(now)) != 0 { return now }
            now += step
        }
        return nil
    }

    /// A server streaming an endless update at 1 MB/s is cut off at the ceiling (120 s),
    /// however far ahead of the floor it stays.
    @Test func noCallOutlastsTheCeiling() {
        var deadline = Self.begun()
        let ceiling = Int64(DESKTOP_VNC_CALL_CEILING_MS)
        #expect(Self.firstPassed(&deadline, from: 0, to: 600_000, step: 100) { UInt64($0) * 1000 } == ceiling)
        // A timeout longer than the ceiling is the bound instead.
        var long = Self.begun(timeout: 200_000)
        #expect(Self.firstPassed(&long, from: 0, to: 600_000, step: 100) { UInt64($0) * 1000 } == 200_000)
    }

    @Test func aSilentCallEndsAtTheTimeout() {
        var deadline = Self.begun(counter: 5000)
        #expect(Self.firstPassed(&deadline, from: 0, to: 60_000, step: 100) { _ in 5000 } == 10_000)
    }

    /// An 8 MB update (a raw 1920×1080 screen) arriving at 100 KB/s takes 83 s whole, far
    /// past the 10 s the call had before, and is never cut short.
    @Test func aMessageThatKeepsArrivingOutlastsTheTimeout() {
        let size: UInt64 = 1920 * 1080 * 4
        var deadline = Self.begun(counter: 1000)
        let arrived = Self.firstPassed(&deadline, from: 0, to: 90_000, step: 500) { ms in 1000 + min(size, UInt64(ms) * 100) }
        #expect(arrived == nil)
    }

    /// The silence bound counts from the last byte, not from the start: a message that stops
    /// halfway is cut off the timeout after its last byte.
    @Test func aMessageThatStopsIsCutOffTheTimeoutAfterItsLastByte() {
        var deadline = Self.begun()
        // 1 MB/s for 30 s, then nothing.
        let passed = Self.firstPassed(&deadline, from: 0, to: 120_000, step: 100) { ms in UInt64(min(ms, 30_000)) * 1000 }
        #expect(passed == 40_000)
    }

    /// One byte every 9 s never leaves the connection silent for 10 s, and still ends the call
    /// at 10 s: the bytes earned next to nothing at the floor (a millisecond each per 64).
    @Test func aPeerTricklingABytePerNineSecondsIsCutOffAtTheTimeout() {
        var deadline = Self.begun()
        let passed = Self.firstPassed(&deadline, from: 0, to: 600_000, step: 100) { ms in UInt64(ms / 9000) }
        #expect(passed == 10_000)
    }

    /// A peer at half the floor falls behind it by the timeout at twice the timeout (t = 10 s
    /// + t / 2); one at the floor or faster goes on until the ceiling (120 s).
    @Test func theFloorRateBoundsAMessageBySize() {
        var half = Self.begun()
        #expect(Self.firstPassed(&half, from: 0, to: 600_000, step: 100) { ms in UInt64(ms) * 32 * 1024 / 1000 } == 20_000)
        var atFloor = Self.begun()
        #expect(Self.firstPassed(&atFloor, from: 0, to: 600_000, step: 100) { ms in UInt64(ms) * 64 * 1024 / 1000 } == Int64(DESKTOP_VNC_CALL_CEILING_MS))
    }

    /// A failed sample reads 0: no progress, and not the new base (the next good one counts
    /// only what moved since the last good one).
    @Test func aFailedSampleIsNoProgress() {
        var deadline = Self.begun(counter: 1_000_000)
        #expect(desktop_vnc_deadline_passed(&deadline, 5000, 0) == 0)
        #expect(deadline.moved == 0 && deadline.progress_ms == 0)
        #expect(desktop_vnc_deadline_passed(&deadline, 6000, 2_000_000) == 0)
        #expect(deadline.moved == 1_000_000 && deadline.progress_ms == 6000)
        #expect(desktop_vnc_deadline_passed(&deadline, 15_999, 0) == 0)
        #expect(desktop_vnc_deadline_passed(&deadline, 16_000, 0) != 0)
    }

    /// `desktop_vnc_deadline_left_ms` (what the X reader's poll waits) ends exactly when
    /// the rule passes if nothing more moves: not a millisecond before, so a wait that ends
    /// finds the call past its deadline; not after, so no wait outlasts it. Sampled along
    /// calls that go silent, stream and stop, run at and below the floor, and reach the
    /// ceiling or a timeout longer than it.
    @Test func theTimeLeftEndsWhenTheRulePasses() {
        let calls: [(name: String, timeout: Int32, counter: @Sendable (Int64) -> UInt64)] = [
            ("silent", Self.timeout, { _ in 5000 }),
            ("stops", Self.timeout, { ms in UInt64(min(ms, 30_000)) * 1000 }),
            ("at the floor", Self.timeout, { ms in UInt64(ms) * 64 * 1024 / 1000 }),
            ("half the floor", Self.timeout, { ms in UInt64(ms) * 32 * 1024 / 1000 }),
            ("trickle", Self.timeout, { ms in UInt64(ms / 9000) }),
            ("past the ceiling", 200_000, { ms in UInt64(ms) * 1000 }),
        ]
        for call in calls {
            var deadline = Self.begun(timeout: call.timeout)
            var now: Int64 = 0
            var ended = false
            while now <= 600_000 && !ended {
                let counter = call.counter(now)
                if desktop_vnc_deadline_passed(&deadline, now, counter) != 0 {
                    #expect(desktop_vnc_deadline_left_ms(&deadline, now) == 0, "\(call.name) at \(now)")
                    ended = true
                    continue
                }
                let left = desktop_vnc_deadline_left_ms(&deadline, now)
                #expect(left > 0, "\(call.name) at \(now)")
                var quiet = deadline
                #expect(desktop_vnc_deadline_passed(&quiet, now + left - 1, counter) == 0, "\(call.name) at \(now) + \(left) - 1")
                #expect(desktop_vnc_deadline_passed(&quiet, now + left, counter) != 0, "\(call.name) at \(now) + \(left)")
                now += 700
            }
            #expect(ended, "\(call.name) never passed")
        }
    }

    /// No floor given (0 or less) is the slowest floor, 1 byte a second; no timeout, 1 ms.
    @Test func degenerateBoundsAreClamped() {
        var deadline = Self.begun(timeout: 0, floor: 0)
        #expect(deadline.timeout_ms == 1 && deadline.floor_bytes_per_second == 1)
        #expect(desktop_vnc_deadline_passed(&deadline, 1, 0) != 0)
    }
}
