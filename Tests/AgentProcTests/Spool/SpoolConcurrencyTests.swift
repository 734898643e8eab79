import Glibc
import Synchronization
import Testing
@testable import AgentProc
import AgentTestSupport

@Suite(.ownThreads) struct ConcurrencyTests {
    /// Readers hammer random ranges while the writer recycles segments under them; every
    /// byte returned must be the pattern byte of its offset.
    @Test func readersNeverSeeWrongBytesWhileWriterRecycles() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(directory: tmp.path)  // 1 MiB segments, 8 MiB cap
        let spool = try store.create(id: "c0")
        let total = 200 << 20
        let done = Atomic<Bool>(false)
        let bad = Atomic<Int>(0)
        let verified = Atomic<Int>(0)
        let chunkBase = patternBytes(from: 0, count: 1)  // warm up pattern()
        _ = chunkBase
        let readers = (0..<2).map { r in
            TestThread {
                var rng = TestRNG(state: 0x1234_5678 &+ UInt64(r) &* 0x9E37)
                while !done.load(ordering: .acquiring) {
                    // Half the reads target the oldest segment, the one about to be recycled.
                    let end = spool.end
                    let lo = end > (10 << 20) ? end - (10 << 20) : 0
                    let at = rng.below(2) == 0 ? spool.dropped + rng.below(1 << 20) : lo + rng.below(end - lo + 1)
                    let limit = Int(rng.below(600_000))
                    let res = spool.read(from: at, limit: limit)
                    // offset is the request raised to dropped, or clamped to end.
                    let offsetOK = res.offset == max(at, res.dropped) || (res.offset == res.end && at >= res.end)
                    if !matchesPattern(res) || !offsetOK
                        || res.next != res.offset + UInt64(res.bytes.count) || res.next > res.end
                    {
                        print("bad read: at \(at) limit \(limit) -> offset \(res.offset) count \(res.bytes.count) next \(res.next) dropped \(res.dropped) end \(res.end) pattern \(matchesPattern(res))")
                        bad.add(1, ordering: .relaxed)
                    }
                    verified.add(res.bytes.count, ordering: .relaxed)
                }
            }
        }
        let writer = TestThread {
            let chunk = 256 << 10
            var off: UInt64 = 0
            // Pattern chunks are generated per offset; 200 MiB in 256 KiB chunks.
            while off < UInt64(total) {
                let bytes = patternBytes(from: off, count: chunk)
                bytes.withUnsafeBytes { spool.append($0) }
                off += UInt64(chunk)
            }
            done.store(true, ordering: .releasing)
        }
        writer.join()
        for r in readers { r.join() }
        #expect(bad.load(ordering: .relaxed) == 0)
        #expect(verified.load(ordering: .relaxed) > 0)
        print("concurrent readers verified \(verified.load(ordering: .relaxed)) bytes")
        #expect(spool.end == UInt64(total))
        #expect(spool.end - spool.dropped <= 8 << 20)
        #expect(segmentDiskUsage(tmp.path).size <= 8 << 20)
    }

    /// Two writers on two spools evict each other's segments through a tight total cap.
    @Test func twoWritersEvictEachOtherSafely() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let seg = 256 << 10
        let maxTotal = 2 << 20
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: seg, maxBytesPerSpool: 8 << 20, maxTotalBytes: maxTotal))
        let spools = [try store.create(id: "a"), try store.create(id: "b")]
        let done = Atomic<Int>(0)
        let bad = Atomic<Int>(0)
        let worst = Atomic<Int>(0)
        let writers = spools.enumerated().map { i, s in
            TestThread {
                var off: UInt64 = 0
                let chunk = 100_000 + i * 31_337
                while off < 48 << 20 {
                    s.append(patternBytes(from: off, count: chunk))
                    off += UInt64(chunk)
                    let t = store.totalBytes
                    if t > worst.load(ordering: .relaxed) { worst.store(t, ordering: .relaxed) }
                }
                done.add(1, ordering: .releasing)
            }
        }
        let reader = TestThread {
            var rng = TestRNG(state: 99)
            while done.load(ordering: .acquiring) < 2 {
                let s = spools[Int(rng.below(2))]
                let res = s.read(from: s.dropped + rng.below(1 << 20), limit: Int(rng.below(700_000)))
                if !matchesPattern(res) { bad.add(1, ordering: .relaxed) }
            }
        }
        for w in writers { w.join() }
        reader.join()
        #expect(bad.load(ordering: .relaxed) == 0)
        // Bound: max(maxTotalBytes, W × segmentBytes), W = 2 writers.
        #expect(worst.load(ordering: .relaxed) <= max(maxTotal, 2 * seg))
        #expect(segmentDiskUsage(tmp.path).size <= max(maxTotal, 2 * seg))
        for s in spools {
            let (first, bytes) = readAll(s)
            #expect(first == s.dropped && bytes == patternBytes(from: first, count: Int(s.end - first)))
            #expect(s.end - s.dropped <= UInt64(maxTotal))
        }
        #expect(store.counters.bytesDroppedTotalCap > 0 && store.counters.segmentsRecycled > 0)
    }
}
