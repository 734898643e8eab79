import AgentSystem
import AgentTestSupport
import Dispatch
import LineRegex
import Synchronization
import Testing

@testable import AgentProc

/// An await's matching runs on the match pool, never on the thread that hands the bytes over
/// (the reactor reading every process's output), and an exit waits for what was handed over.
@Suite(.serialized) struct OutputWatchTests {
    /// Holds both of the match pool's threads until `release()`.
    private final class PoolHold: Sendable {
        private let gate = DispatchSemaphore(value: 0)
        private let held = Atomic<Int>(0)

        init() {
            for _ in 0..<OutputWatch.pool.threads {
                OutputWatch.pool.submit { [self] in
                    held.add(1, ordering: .relaxed)
                    gate.wait()
                }
            }
        }

        var holding: Bool { held.load(ordering: .relaxed) == OutputWatch.pool.threads }

        func release() { for _ in 0..<OutputWatch.pool.threads { gate.signal() } }
    }

    /// With the pool's threads held, live output is queued and not matched, and the exit's
    /// wait for it does not end; once they are free, the line matches, then the wait ends.
    /// (On the reactor, the line was matched inside `feed`.)
    @Test func liveOutputIsMatchedOnThePoolAndTheExitWaitsForIt() async throws {
        let watch = OutputWatch(condition: .pattern(try LineRegex("^ready on [0-9]+$")), from: 0)
        watch.endCatchUp()
        let hold = PoolHold()
        #expect(await eventually { hold.holding })
        Array("starting\nready on 8080\n".utf8).withUnsafeBytes { watch.feed($0, at: 0) }
        #expect(watch.match == nil, "queued: the caller's thread did not match it")
        let waited = TestFlag()
        let exit = Task {
            await watch.matchedSoFar()
            waited.set()
        }
        #expect(!waited.isSet)
        hold.release()
        await exit.value
        #expect(waited.isSet)
        #expect(watch.match == OutputWatch.Match(line: Array("ready on 8080".utf8), offset: 9), "matched before the wait ended")
    }

    /// An await that ends stops its matching: what is queued after is not matched.
    @Test func aStoppedWatchMatchesNothingMore() async throws {
        let watch = OutputWatch(condition: .literal(Array("late".utf8)), from: 0)
        watch.endCatchUp()
        watch.stop()
        Array("late\n".utf8).withUnsafeBytes { watch.feed($0, at: 0) }
        await watch.matchedSoFar()
        #expect(watch.match == nil)
    }

    /// The unfinished last line is tested at the end of the output, and the exit's wait
    /// covers that test too.
    @Test func theEndTestsTheUnfinishedLineBeforeTheWaitEnds() async throws {
        let watch = OutputWatch(condition: .literal(Array("[y/N]".utf8)), from: 0)
        watch.endCatchUp()
        let prompt = Array(repeating: UInt8(ascii: "x"), count: OutputWatch.promptBytes + 1) + Array(" [y/N] ".utf8)
        prompt.withUnsafeBytes { watch.feed($0, at: 0) }
        watch.outputEnded()
        await watch.matchedSoFar()
        #expect(watch.match?.offset == 0, "a prompt too long for the re-tests matches at the end")
    }

    /// Bytes skipped before they were seen (a gap) leave the rest of a line whose start was
    /// not seen: it is not matched as a line, and matching resumes after its newline (an
    /// anchored pattern matched the fragment before, at an offset that was no line's start).
    /// Output skipped because too much waited to be matched (during a slow catch-up) ends
    /// a line: the next chunk begins one, and is matched. (It was taken for the rest of a
    /// line and skipped, so an await missed the line after a burst on a busy host.) Skipped
    /// bytes that end mid-line still make the next line's rest no line.
    @Test(arguments: [true, false])
    func afterSkippedBytesThatEndALineTheNextLineCounts(endsLine: Bool) throws {
        let watch = OutputWatch(condition: .literal(Array("after".utf8)), from: 0, inline: true)
        let pending = OutputWatch.maxPendingBytes
        // While catching up nothing is matched: the first chunk fills what may wait, and the
        // second takes its place (the oldest makes room).
        [UInt8](repeating: UInt8(ascii: "a"), count: pending).withUnsafeBytes { watch.feed($0, at: 0) }
        let skipped = Array((endsLine ? "aaa\n" : "aaa").utf8)
        skipped.withUnsafeBytes { watch.feed($0, at: UInt64(pending)) }
        watch.endCatchUp()
        #expect(watch.match == nil)
        let next = UInt64(pending + skipped.count)
        Array("after the burst\n".utf8).withUnsafeBytes { watch.feed($0, at: next) }
        if endsLine {
            #expect(watch.match == OutputWatch.Match(line: Array("after the burst".utf8), offset: next))
        } else {
            #expect(watch.match == nil, "the rest of a line whose start was skipped")
            Array("after, a whole line\n".utf8).withUnsafeBytes { watch.feed($0, at: next + 16) }
            #expect(watch.match == OutputWatch.Match(line: Array("after, a whole line".utf8), offset: next + 16))
        }
    }

    /// When more waits than may be queued (a burst during a slow catch-up: the match pool
    /// busy with other awaits), the oldest queued output makes room, so the line that comes
    /// after the burst, which an await waits for, is kept. (It was dropped as the newest, and
    /// with nothing written after it the await timed out: `BulkOutputTests` in a full run.)
    @Test func theNewestOutputIsKeptWhenTooMuchWaits() throws {
        let watch = OutputWatch(condition: .literal(Array("after".utf8)), from: 0, inline: true)
        let pending = OutputWatch.maxPendingBytes
        // While catching up nothing is matched: the burst fills what may wait.
        [UInt8](repeating: 0, count: pending).withUnsafeBytes { watch.feed($0, at: 0) }
        Array("\n".utf8).withUnsafeBytes { watch.feed($0, at: UInt64(pending)) }
        Array("after the burst\n".utf8).withUnsafeBytes { watch.feed($0, at: UInt64(pending + 1)) }
        #expect(watch.match == nil)
        watch.endCatchUp()
        #expect(watch.match == OutputWatch.Match(line: Array("after the burst".utf8), offset: UInt64(pending + 1)))
    }

    /// Many one-byte chunks count their overhead too: the queue stays bounded in chunks, and
    /// the newest still match.
    @Test func aTrickleOfTinyChunksIsBoundedAndTheNewestMatch() throws {
        let watch = OutputWatch(condition: .literal(Array("xyz".utf8)), from: 0, inline: true)
        let count = 2 * OutputWatch.maxPendingBytes / OutputWatch.chunkOverhead
        for offset in 0..<count { Array("a".utf8).withUnsafeBytes { watch.feed($0, at: UInt64(offset)) } }
        Array("\nxyz\n".utf8).withUnsafeBytes { watch.feed($0, at: UInt64(count)) }
        watch.endCatchUp()
        #expect(watch.match == OutputWatch.Match(line: Array("xyz".utf8), offset: UInt64(count + 1)))
    }

    @Test func afterAGapTheRestOfALineIsNotALine() throws {
        let watch = OutputWatch(condition: .pattern(try LineRegex("^ERROR")), from: 0, inline: true)
        watch.endCatchUp()
        Array("first\n".utf8).withUnsafeBytes { watch.feed($0, at: 0) }
        Array("ERROR, the end of a line\nERROR a whole line\n".utf8).withUnsafeBytes { watch.feed($0, at: 100) }
        #expect(watch.match == OutputWatch.Match(line: Array("ERROR a whole line".utf8), offset: 125))
    }
}
