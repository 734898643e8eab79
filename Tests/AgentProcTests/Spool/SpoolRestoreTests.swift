import Glibc
import Testing
@testable import AgentProc
import AgentTestSupport

@Suite(.ownThreads) struct RestoreTests {
    static let limits = OutputSpoolStore.Limits(segmentBytes: 1 << 20, maxBytesPerSpool: 4 << 20, maxTotalBytes: 64 << 20)

    /// A state directory anyone may have written: a cursor whose end is past any output (its
    /// offsets overflowed: a trap at every start), and a FIFO as the cursor (its open blocked
    /// the start for ever). Neither is restored; the agent starts.
    @Test func aHostileSpoolIsNotRestored() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        let huge = tmp.path + "/huge"
        #expect(mkdir(huge, 0o700) == 0)
        writeFile(huge + "/cursor", SpoolCursor(dropped: 0, end: .max).encoded())
        writeFile(huge + "/" + Posix.segmentName(.max - 15), [UInt8](repeating: 1, count: 32))
        #expect(store.restore(id: "huge") == nil)
        let high = tmp.path + "/high"
        #expect(mkdir(high, 0o700) == 0)
        let start: UInt64 = 1 << 63
        writeFile(high + "/cursor", SpoolCursor(dropped: start, end: start + 20_000).encoded())
        writeFile(high + "/" + Posix.segmentName(start), [UInt8](repeating: 2, count: 20_000))
        #expect(store.restore(id: "high") == nil)
        let fifo = tmp.path + "/fifo"
        #expect(mkdir(fifo, 0o700) == 0)
        #expect(mkfifo(fifo + "/cursor", 0o600) == 0)
        #expect(store.restore(id: "fifo") == nil)
    }

    /// Writes without finish() (as if SIGKILLed), then a new store restores identical reads.
    /// The current segment is a recycled file with stale bytes beyond `end`.
    @Test func restoreAfterCrashReproducesReadsExactly() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let old = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        let s = try old.create(id: "dead")
        appendPattern(s, count: 10 << 20 + 12345, chunk: 256 << 10 + 3)
        #expect(old.counters.segmentsRecycled > 0)
        let lastStart = UInt64(10 << 20)
        let lastPath = s.directory + "/" + Posix.segmentName(lastStart)
        #expect(fileSize(lastPath) == 1 << 20)  // recycled: stale tail beyond end
        let before = readAll(s, limit: 999_999)

        let store = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        #expect(store.storedIDs() == ["dead"])
        let r = try #require(store.restore(id: "dead"))
        #expect(r.end == s.end && r.dropped == s.dropped)
        let after = readAll(r, limit: 999_999)
        #expect(after.0 == before.0 && after.1 == before.1)
        #expect(after.1 == patternBytes(from: s.dropped, count: Int(s.end - s.dropped)))
        #expect(fileSize(lastPath) == 12345)  // stale tail removed
        #expect(store.totalBytes == Int(r.end - r.dropped))
        for o in [0, s.dropped, s.dropped + 1, lastStart - 1, lastStart, s.end - 1, s.end, s.end + 9] {
            #expect(r.read(from: o, limit: 70_000) == s.read(from: o, limit: 70_000))
        }
        r.append([1, 2, 3])  // read-only
        #expect(r.end == s.end)
        #expect(store.restore(id: "dead")?.end == r.end)  // already open: same spool
    }

    /// A crash right after a segment was recycled (renamed to the new start, cursor not yet
    /// updated) and leftovers below `dropped` are cleaned; unknown files stay.
    @Test func restoreIgnoresStaleAndUnknownFiles() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let old = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        let s = try old.create(id: "ab")
        appendPattern(s, count: 6 << 20, chunk: 1 << 20)  // segments 2..5 MiB kept, dropped 2 MiB
        #expect(s.dropped == 2 << 20)
        let dir = s.directory
        // Stale: a renamed-in segment at `end` (cursor not updated), and an old one below dropped.
        writeFile(dir + "/" + Posix.segmentName(6 << 20), [UInt8](repeating: 0xEE, count: 1 << 20))
        writeFile(dir + "/" + Posix.segmentName(0), [UInt8](repeating: 0xDD, count: 1 << 20))
        // Unknown things the store does not own.
        writeFile(dir + "/record.json", Array("{}".utf8))
        writeFile(dir + "/0000000000000abc.tmp", [1])
        mkdir(dir + "/sub", 0o700)
        symlink("/etc/passwd", dir + "/" + Posix.segmentName(7 << 20))

        let store = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        let r = try #require(store.restore(id: "ab"))
        #expect(r.dropped == 2 << 20 && r.end == 6 << 20)
        #expect(readAll(r).1 == patternBytes(from: 2 << 20, count: 4 << 20))
        #expect(fileSize(dir + "/" + Posix.segmentName(6 << 20)) == nil)
        #expect(fileSize(dir + "/" + Posix.segmentName(0)) == nil)
        #expect(fileSize(dir + "/record.json") == 2)
        #expect(fileSize(dir + "/0000000000000abc.tmp") == 1)
        #expect(Posix.lstatInfo(dir + "/sub") != nil)
        #expect(Posix.lstatInfo(dir + "/" + Posix.segmentName(7 << 20)) != nil)  // symlink left alone
    }

    @Test func restoreSurvivesDamage() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let old = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        var ids: [String] = []
        for i in 0..<6 {
            let s = try old.create(id: "d\(i)")
            appendPattern(s, count: 3 << 20 + 100, chunk: 256 << 10)  // segments at 0,1,2,3 MiB
            s.finish()
            ids.append(s.id)
        }
        let d = { (i: Int) in tmp.path + "/d\(i)" }
        // d0: garbage cursor → nil.
        writeFile(d(0) + "/cursor", [UInt8](repeating: 0x5A, count: 32))
        // d1: truncated cursor → nil.
        let c = Posix.openWrite(d(1) + "/cursor"); ftruncate(c, 10); close(c)
        // d2: missing middle segment → everything before the gap dropped.
        unlink(d(2) + "/" + Posix.segmentName(1 << 20))
        // d3: truncated last segment → nothing provable, dropped = end.
        let f = Posix.openWrite(d(3) + "/" + Posix.segmentName(3 << 20)); ftruncate(f, 50); close(f)
        // d4: truncated middle segment → dropped after it.
        let g = Posix.openWrite(d(4) + "/" + Posix.segmentName(1 << 20)); ftruncate(g, 1000); close(g)
        // d5: no cursor file at all → nil; its other files stay.
        unlink(d(5) + "/cursor")

        let store = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        #expect(store.restore(id: "d0") == nil)
        #expect(store.restore(id: "d1") == nil)
        #expect(store.restore(id: "d5") == nil)
        #expect(store.restore(id: "missing") == nil)
        #expect(store.restore(id: "../etc") == nil)
        let end = UInt64(3 << 20 + 100)
        let r2 = try #require(store.restore(id: "d2"))
        #expect(r2.end == end && r2.dropped == 2 << 20)
        #expect(readAll(r2).1 == patternBytes(from: 2 << 20, count: (1 << 20) + 100))
        let r3 = try #require(store.restore(id: "d3"))
        #expect(r3.end == end && r3.dropped == end)
        #expect(r3.read(from: 0, limit: 10) == SpoolRead(bytes: [], offset: end, next: end, dropped: end, end: end))
        let r4 = try #require(store.restore(id: "d4"))
        #expect(r4.dropped == 2 << 20 && readAll(r4).1 == patternBytes(from: 2 << 20, count: (1 << 20) + 100))
        #expect(store.totalBytes == segmentDiskUsage(d(2)).size + segmentDiskUsage(d(3)).size + segmentDiskUsage(d(4)).size)
        #expect(segmentDiskUsage(d(5)).files == 4)  // not restored: untouched
        // Cursor garbage in the middle of the file set: still no crash when removing.
        for id in ids { store.remove(id: id) }
        #expect(store.totalBytes == 0)
        #expect(store.storedIDs().isEmpty)
    }

    @Test func restoredSpoolsCountTowardTotalCapAndAreEvictedFirst() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let mib = 1 << 20
        let old = try OutputSpoolStore(directory: tmp.path, limits: Self.limits)
        for id in ["e1", "e2"] {
            let s = try old.create(id: id)
            appendPattern(s, count: 3 * mib, chunk: mib)
        }
        // New process with a smaller total cap: restoring enforces it at once.
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: mib, maxBytesPerSpool: 4 * mib, maxTotalBytes: 4 * mib))
        let e1 = try #require(store.restore(id: "e1"))
        let e2 = try #require(store.restore(id: "e2"))
        #expect(store.totalBytes == 4 * mib)
        #expect(e1.dropped + e2.dropped == UInt64(2 * mib))
        let w = try store.create(id: "ff")
        appendPattern(w, count: 2 * mib, chunk: 256 << 10)
        #expect(store.totalBytes <= 4 * mib)
        #expect(e1.dropped + e2.dropped == UInt64(4 * mib))  // restored segments went first
        #expect(w.dropped == 0)
        #expect(store.counters.segmentsRecycled == 2)
        #expect(segmentDiskUsage(tmp.path).size <= 4 * mib)
    }
}
