@testable import AgentHTTP
import Testing

/// The write-stall wake-up's look at a blocked socket, on a controlled clock.
@Suite struct WriteStallWatchTests {
    private let start = ContinuousClock.now

    /// `seconds` after the start.
    private func at(_ seconds: Double) -> ContinuousClock.Instant { start.advanced(by: .seconds(seconds)) }

    @Test func bytesGoneAreProgressWhenEverTheLookComes() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: 1000, lookAt: at(1))
        #expect(watch.look(buffered: 400, now: at(1)) == .progressed)
        watch.scheduled(buffered: 400, lookAt: at(2))
        #expect(watch.look(buffered: 300, now: at(9)) == .progressed)
    }

    /// A look on time that finds as many bytes (or more: a body part written since) waiting
    /// is a stall; one that comes late reports by how much.
    @Test func nothingGoneIsAStallOrALateLook() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: 1000, lookAt: at(1))
        #expect(watch.look(buffered: 1000, now: at(1)) == .stalled)
        watch.scheduled(buffered: 1000, lookAt: at(2))
        #expect(watch.look(buffered: 1200, now: at(2)) == .stalled)
        watch.scheduled(buffered: 1200, lookAt: at(3))
        #expect(watch.look(buffered: 1200, now: at(6.5)) == .late(.milliseconds(3500)))
    }

    /// The look's count becomes the mark: the next look compares with it, not the first.
    @Test func eachLookComparesWithTheOneBefore() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: 1000, lookAt: at(1))
        #expect(watch.look(buffered: 500, now: at(1)) == .progressed)
        #expect(watch.look(buffered: 500, now: at(2)) == .stalled)
    }

    /// A channel that cannot say its buffered bytes never counts as progress.
    @Test func unknownCountsAreNoProgress() {
        var watch = WriteStallWatch<ContinuousClock.Instant>()
        watch.scheduled(buffered: nil, lookAt: at(1))
        #expect(watch.look(buffered: 10, now: at(1)) == .stalled)
        #expect(watch.look(buffered: 5, now: at(2)) == .progressed)
        #expect(watch.look(buffered: nil, now: at(3)) == .stalled)
    }
}
