@testable import AgentHTTP
import Testing

/// The write-stall wake-up's look at a blocked socket, on a controlled clock.
@Suite struct WriteStallWatchTests {
    private let start = ContinuousClock.now

    @Test func bytesGoneAreProgressWhenEverTheLookComes() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: 1000, lookAt: start.advanced(by: .seconds(1)))
        #expect(watch.look(buffered: 400, now: start.advanced(by: .seconds(1))) == .progressed)
        watch.scheduled(buffered: 400, lookAt: start.advanced(by: .seconds(2)))
        #expect(watch.look(buffered: 300, now: start.advanced(by: .seconds(9))) == .progressed)
    }

    /// A look on time that finds as many bytes (or more: a body part written since) waiting
    /// is a stall; one that comes late reports by how much.
    @Test func nothingGoneIsAStallOrALateLook() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: 1000, lookAt: start.advanced(by: .seconds(1)))
        #expect(watch.look(buffered: 1000, now: start.advanced(by: .seconds(1))) == .stalled)
        watch.scheduled(buffered: 1000, lookAt: start.advanced(by: .seconds(2)))
        #expect(watch.look(buffered: 1200, now: start.advanced(by: .seconds(2))) == .stalled)
        watch.scheduled(buffered: 1200, lookAt: start.advanced(by: .seconds(3)))
        #expect(watch.look(buffered: 1200, now: start.advanced(by: .milliseconds(6500))) == .late(.milliseconds(3500)))
    }

    /// The look's count becomes the mark: the next look compares with it, not the first.
    @Test func eachLookComparesWithTheOneBefore() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: 1000, lookAt: start.advanced(by: .seconds(1)))
        #expect(watch.look(buffered: 500, now: start.advanced(by: .seconds(1))) == .progressed)
        #expect(watch.look(buffered: 500, now: start.advanced(by: .seconds(2))) == .stalled)
    }

    /// A channel that cannot say its buffered bytes never counts as progress.
    @Test func unknownCountsAreNoProgress() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: nil, lookAt: start.advanced(by: .seconds(1)))
        #expect(watch.look(buffered: 10, now: start.advanced(by: .seconds(1))) == .stalled)
        #expect(watch.look(buffered: 5, now: start.advanced(by: .seconds(2))) == .progressed)
        #expect(watch.look(buffered: nil, now: start.advanced(by: .seconds(3))) == .stalled)
    }
}
