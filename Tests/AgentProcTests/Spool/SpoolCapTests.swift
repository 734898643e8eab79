import Glibc
import Testing
@testable import AgentProc
import AgentTestSupport

@Suite(.ownThreads) struct CapTests {
    @Test func perSpoolCapKeepsExactlyTheLastBytes() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(directory: tmp.path)  // 1 MiB segments, 8 MiB per spool
        let spool = try store.create(id: "50")
        let total = 50 << 20
        appendPattern(spool, count: total, chunk: 300_001)
        #expect(spool.end == UInt64(total))
        let kept = spool.end - spool.dropped
        // Bound: kept ≤ maxBytesPerSpool; and at least (maxSegments - 1) full segments.
        #expect(kept <= 8 << 20 && kept > 7 << 20)
        #expect(store.counters.bytesDroppedPerSpoolCap == spool.dropped)
        #expect(store.counters.segmentsRecycled == 50 - 8)
        let disk = segmentDiskUsage(spool.directory)
        #expect(disk.size <= 8 << 20 && disk.files == 8)
        #expect(store.totalBytes == 8 << 20)
        let (first, bytes) = readAll(spool, from: 0, limit: 3 << 20)
        #expect(first == spool.dropped)
        #expect(bytes.count == Int(kept))
        #expect(bytes == patternBytes(from: spool.dropped, count: Int(kept)))
        spool.finish()
        #expect(segmentDiskUsage(spool.directory).size == Int(kept))
        #expect(store.totalBytes == Int(kept))
    }

    @Test func totalCapEvictsGloballyOldestFirst() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let mib = 1 << 20
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: mib, maxBytesPerSpool: 8 * mib, maxTotalBytes: 8 * mib))
        let a = try store.create(id: "a")
        appendPattern(a, count: 4 * mib, chunk: 256 << 10)
        a.finish()
        let b = try store.create(id: "b")
        appendPattern(b, count: 3 * mib + mib / 2, chunk: 256 << 10)
        b.finish()
        #expect(store.totalBytes == 7 * mib + mib / 2)
        let c = try store.create(id: "c")
        appendPattern(c, count: mib, chunk: 256 << 10)
        // A's oldest segment was recycled into C; B untouched.
        #expect(a.dropped == UInt64(mib) && b.dropped == 0)
        appendPattern(c, count: 3 * mib, chunk: 256 << 10)
        #expect(a.dropped == a.end && b.dropped == 0)
        #expect(store.counters.segmentsRecycled == 4)
        #expect(store.counters.bytesDroppedTotalCap == UInt64(4 * mib))
        appendPattern(c, count: 2 * mib, chunk: 256 << 10)
        #expect(b.dropped == UInt64(2 * mib))  // then B loses its oldest
        #expect(c.dropped == 0)
        let bound = 8 * mib  // max(maxTotalBytes, W × segmentBytes) with W = 1 writer
        #expect(store.totalBytes <= bound)
        #expect(segmentDiskUsage(tmp.path).size <= store.totalBytes)
        let (bFirst, bBytes) = readAll(b)
        #expect(bFirst == UInt64(2 * mib) && bBytes == patternBytes(from: UInt64(2 * mib), count: 3 * mib / 2))
        #expect(readAll(a).1.isEmpty && a.read(from: 0, limit: 10).offset == a.end)
        let (cFirst, cBytes) = readAll(c)
        #expect(cFirst == 0 && cBytes == patternBytes(from: 0, count: 6 * mib))
    }

    @Test func thousandSmallSpoolsStayWithinTotalCap() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let maxTotal = 16 << 20
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: 1 << 20, maxBytesPerSpool: 8 << 20, maxTotalBytes: maxTotal))
        var spools: [OutputSpool] = []
        var worst = 0
        for i in 0..<1000 {
            let s = try store.create(id: String(i, radix: 16))
            appendPattern(s, count: 64 << 10, chunk: 64 << 10)
            worst = max(worst, store.totalBytes)
            s.finish()
            spools.append(s)
        }
        #expect(worst <= maxTotal)  // bound: max(maxTotalBytes, 1 writer × 1 MiB)
        let disk = segmentDiskUsage(tmp.path)
        #expect(disk.size == store.totalBytes)
        #expect(disk.blocks <= maxTotal + 4096 * disk.files)
        print("1000 spools: total \(store.totalBytes), files \(disk.files), st_size \(disk.size), st_blocks*512 \(disk.blocks)")
        // Oldest spools lost everything, newest kept everything, with one cut-over point.
        let firstKept = spools.firstIndex { $0.dropped == 0 } ?? 1000
        #expect(firstKept > 700 && firstKept < 1000)
        for (i, s) in spools.enumerated() {
            #expect(s.dropped == (i < firstKept ? s.end : 0))
        }
        for s in spools[firstKept...] {
            #expect(readAll(s).1 == patternBytes(from: 0, count: 64 << 10))
        }
        #expect(disk.files == 1000 - firstKept)
        for s in spools { store.remove(id: s.id) }
        #expect(store.totalBytes == 0)
        #expect(Posix.listDirectory(tmp.path).isEmpty)
    }

    @Test func writeErrorDropsBytesAndKeepsOffsetsConsistent() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: 4096, maxBytesPerSpool: 1 << 20, maxTotalBytes: 1 << 20))
        let s = try store.create(id: "e")
        appendPattern(s, count: 10_000, chunk: 1000)
        // Make creating the segment at 12288 fail (EISDIR) — stands in for ENOSPC/EIO.
        let blocker = s.directory + "/" + Posix.segmentName(12288)
        #expect(mkdir(blocker, 0o700) == 0)
        s.append(patternBytes(from: s.end, count: 5000))  // 10000..15000: fails at 12288
        #expect(s.end == 15_000)
        #expect(s.dropped == 15_000)
        #expect(store.counters.writeErrors == 1)
        #expect(store.counters.bytesDroppedWriteErrors == 15_000)
        #expect(s.read(from: 0, limit: 100) == SpoolRead(bytes: [], offset: 15_000, next: 15_000, dropped: 15_000, end: 15_000))
        #expect(segmentDiskUsage(s.directory).files == 0 && store.totalBytes == 0)
        rmdir(blocker)
        appendPattern(s, count: 5000, chunk: 700)
        let (first, bytes) = readAll(s)
        #expect(first == 15_000 && bytes == patternBytes(from: 15_000, count: 5000))
    }
}
