import Glibc
import Testing
import AgentCore
@testable import AgentProc
import AgentTestSupport

@Suite(.ownThreads) struct ReadBackTests {
    @Test func smallWritesAndSegmentCrossingReadBackExactly() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try smallStore(in: tmp)
        let spool = try store.create(id: "abc-01")
        #expect(spool.end == 0 && spool.dropped == 0)
        #expect(spool.read(from: 0, limit: 10) == SpoolRead(bytes: [], offset: 0, next: 0, dropped: 0, end: 0))
        // Sizes hitting every boundary: tiny, exactly to a boundary, across one and several segments.
        let sizes = [1, 7, 4088, 4096, 1, 4095, 4097, 10000, 3, 8192, 12289, 500, 65536, 2]
        for n in sizes { spool.append(patternBytes(from: spool.end, count: n)) }
        let end = UInt64(sizes.reduce(0, +))
        #expect(spool.end == end)
        #expect(spool.dropped == 0)
        let (first, all) = readAll(spool, limit: 777)
        #expect(first == 0)
        #expect(all == patternBytes(from: 0, count: Int(end)))

        for o in [0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 12288, Int(end) - 1] as [Int] {
            for limit in [0, 1, 2, 4095, 4096, 4097, 9000, 1 << 22] {
                let r = spool.read(from: UInt64(o), limit: limit)
                let expect = min(limit, Int(end) - o)
                #expect(r.offset == UInt64(o))
                #expect(r.bytes.count == expect)
                #expect(r.next == UInt64(o + expect))
                #expect(r.end == end && r.dropped == 0)
                #expect(matchesPattern(r))
            }
        }
        // At and beyond the end: empty, next == end (never beyond).
        for o in [end, end + 1, end + 100_000, UInt64.max] {
            let r = spool.read(from: o, limit: 100)
            #expect(r == SpoolRead(bytes: [], offset: end, next: end, dropped: 0, end: end))
        }
        #expect(spool.read(from: 5, limit: -3).bytes.isEmpty)
        spool.finish()
        // Still readable after finish; the last segment was trimmed.
        #expect(readAll(spool).1 == all)
        #expect(segmentDiskUsage(spool.directory).size == Int(end))
    }

    @Test func readLimitIsCappedAt4MiB() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(directory: tmp.path)
        let spool = try store.create(id: "0")
        appendPattern(spool, count: 6 << 20, chunk: 256 << 10)
        let r = spool.read(from: 3, limit: 64 << 20)
        #expect(r.bytes.count == 4 << 20)
        #expect(r.next == 3 + (4 << 20))
        #expect(matchesPattern(r))
    }

    @Test func readsBeforeDroppedStartAtDropped() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: 1000, maxBytesPerSpool: 3000, maxTotalBytes: 1 << 20))
        let spool = try store.create(id: "1")
        appendPattern(spool, count: 10_500, chunk: 333)
        #expect(spool.end == 10_500)
        #expect(spool.dropped == 8000)  // 3 segments: [8000, 9000), [9000, 10000), [10000, 10500)
        for o: UInt64 in [0, 7999] {
            let r = spool.read(from: o, limit: 1200)
            #expect(r.offset == 8000 && r.next == 9200 && r.dropped == 8000 && r.end == 10_500)
            #expect(matchesPattern(r))
        }
        let r = spool.read(from: 10_499, limit: 10)
        #expect(r.bytes.count == 1 && r.next == 10_500 && matchesPattern(r))
    }

    @Test func idsAreValidatedAndUnique() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(directory: tmp.path)
        for bad in ["", "..", "ABC", "a/b", "x", String(repeating: "a", count: 65), "a b"] {
            #expect(throws: SpoolError.self) { _ = try store.create(id: bad) }
        }
        _ = try store.create(id: String(repeating: "f", count: 64))
        let s = try store.create(id: "0123-abcd")
        #expect(throws: SpoolError.alreadyExists("0123-abcd")) { _ = try store.create(id: "0123-abcd") }
        #expect(store.storedIDs() == ["0123-abcd", String(repeating: "f", count: 64)])
        #expect(s.directory == tmp.path + "/0123-abcd")
        #expect(FileInfo.of(path: s.directory)?.permissions == 0o700)
        #expect(FileInfo.of(path: s.directory + "/cursor")?.permissions == 0o600)
        #expect(throws: SpoolError.invalidLimits) {
            _ = try OutputSpoolStore(directory: tmp.path, limits: .init(segmentBytes: 10, maxBytesPerSpool: 5))
        }
    }
}
