import AgentCore
import CoreMetrics
import Synchronization
import Glibc

/// Everything mutable in an `OutputSpoolStore`, guarded by its single `Mutex`.
///
/// Why one lock: a writer evicting another spool's oldest segment must update that spool's
/// `dropped`/segments atomically with respect to the other spool's own writer and readers.
/// The lock is held for metadata updates and for directory operations (create, rename,
/// unlink, ftruncate: a few microseconds each, about once per segment), never for segment
/// data `pwrite`/`pread`, which run outside it.
struct StoreState {
    let directory: String
    let segmentBytes: Int
    /// `max(1, maxBytesPerSpool / segmentBytes)`: a spool written by this store never holds
    /// more segments than this, so its files never exceed `maxBytesPerSpool` bytes.
    let maxSegmentsPerSpool: Int
    let maxTotalBytes: Int
    /// File names (besides segments and `cursor`) that `remove(id:)` may delete.
    let extraOwnedFiles: Set<String>

    var spools: [Int: SpoolState] = [:]
    var keys: [String: Int] = [:]
    var nextKey = 0
    /// Store-wide creation sequence for segments created in this process (restored
    /// segments get negative, mtime-ordered values so they are always older).
    var nextSeq: Int64 = 1
    /// Sum of `Segment.accounted` over all live segments.
    var total = 0 {
        didSet { ProcessMetrics.spoolBytes.record(total) }
    }
    var counters = SpoolCounters()
    var heap = EvictionHeap()
    /// Told of every failed write (under the store's lock: it must not take this lock).
    let onWriteError: (@Sendable (SystemCallError) -> Void)?

    enum Cause { case perSpool, total, writeError }

    enum Prepared {
        case write(fd: Int32, position: Int, room: Int)
        case ignore
        /// Making the segment failed (`errno` of the failed call).
        case failed(errno: Int32)
    }

    init(
        directory: String, limits: OutputSpoolStore.Limits, extraOwnedFiles: Set<String>,
        onWriteError: (@Sendable (SystemCallError) -> Void)? = nil
    ) {
        self.onWriteError = onWriteError
        self.directory = directory
        self.segmentBytes = limits.segmentBytes
        self.maxSegmentsPerSpool = max(1, limits.maxBytesPerSpool / limits.segmentBytes)
        self.maxTotalBytes = limits.maxTotalBytes
        self.extraOwnedFiles = extraOwnedFiles
    }

    // MARK: eviction bookkeeping

    mutating func noteFirstSegment(of key: Int) {
        guard let first = spools[key]?.segments.first else { return }
        heap.push(.init(seq: first.seq, key: key))
        if heap.count > 2 * spools.count + 64 {
            heap.removeAll()
            for (k, sp) in spools {
                if let f = sp.segments.first { heap.push(.init(seq: f.seq, key: k)) }
            }
        }
    }

    /// Key of the spool holding the globally oldest segment that may be evicted (every
    /// segment except a writer's open current one), or nil if there is none.
    mutating func popOldestEvictable() -> Int? {
        var aside: [EvictionHeap.Entry] = []
        defer { for e in aside { heap.push(e) } }
        while let e = heap.popMin() {
            guard let sp = spools[e.key], let first = sp.segments.first, first.seq == e.seq else { continue }
            if sp.active && sp.segments.count == 1 {
                aside.append(e)
                continue
            }
            return e.key
        }
        return nil
    }

    /// Removes the oldest segment of `key` from the metadata and advances its `dropped`.
    /// If `allowRecycle` and the file is a full segment, the file is left in place and its
    /// path/accounting returned for the caller to rename (accounting moves with it);
    /// otherwise the file is unlinked and its bytes leave `total`.
    mutating func evictFirst(of key: Int, allowRecycle: Bool, cause: Cause) -> (path: String, accounted: Int)? {
        guard let seg = spools[key]?.segments.first else { return nil }
        spools[key]!.segments.removeFirst()
        let sp = spools[key]!
        let oldDropped = sp.dropped
        let newDropped = max(oldDropped, sp.segments.first?.start ?? sp.end)
        spools[key]!.dropped = newDropped
        countDropped(newDropped - oldDropped, cause)
        noteFirstSegment(of: key)
        let path = sp.path(seg.start)
        if allowRecycle && seg.accounted == segmentBytes && seg.filled == segmentBytes {
            return (path, seg.accounted)
        }
        unlink(path)
        total -= seg.accounted
        return nil
    }

    mutating func countDropped(_ n: UInt64, _ cause: Cause) {
        switch cause {
        case .perSpool: counters.bytesDroppedPerSpoolCap &+= n
        case .total: counters.bytesDroppedTotalCap &+= n
        case .writeError: counters.bytesDroppedWriteErrors &+= n
        }
        ProcessMetrics.spoolDropped(n, cause)
    }

    /// Evicts globally oldest segments until `total + reserving <= maxTotalBytes` or nothing
    /// evictable is left. Returns a full segment file to recycle if `allowRecycle` found one
    /// (recycling keeps `total` unchanged, so the cap then holds for the new segment).
    mutating func enforceTotalCap(reserving: Int, allowRecycle: Bool) -> (path: String, accounted: Int)? {
        while total + reserving > maxTotalBytes {
            guard let victim = popOldestEvictable() else { break }
            if let got = evictFirst(of: victim, allowRecycle: allowRecycle, cause: .total) { return got }
        }
        return nil
    }

    // MARK: writer path

    /// Where the writer of `key` should put its next bytes, acquiring a segment if needed.
    mutating func prepareWrite(_ key: Int) -> Prepared {
        guard let sp = spools[key] else { return .ignore }
        if sp.removed {
            closeWriterDescriptors(key)
            return .ignore
        }
        if sp.finished { return .ignore }
        if sp.active, let last = sp.segments.last, last.filled < segmentBytes, sp.fd >= 0 {
            return .write(fd: sp.fd, position: last.filled, room: segmentBytes - last.filled)
        }
        return acquireSegment(key)
    }

    /// Starts a new segment at the spool's `end`: recycles the spool's own oldest segment if
    /// it is at `maxSegmentsPerSpool`, else evicts globally oldest segments while the total
    /// cap would be exceeded (recycling the first full one found), else creates a new file.
    mutating func acquireSegment(_ key: Int) -> Prepared {
        if spools[key]!.fd >= 0 {
            close(spools[key]!.fd)
            spools[key]!.fd = -1
        }
        spools[key]!.active = false  // the full previous segment is now evictable like any other

        var recycled: (path: String, accounted: Int)? = nil
        while spools[key]!.segments.count >= maxSegmentsPerSpool {
            if let r = evictFirst(of: key, allowRecycle: recycled == nil, cause: .perSpool) { recycled = r }
        }
        if recycled == nil {
            recycled = enforceTotalCap(reserving: segmentBytes, allowRecycle: true)
        }

        let start = spools[key]!.end
        let path = spools[key]!.path(start)
        var fd: Int32 = -1
        var code: Int32 = 0
        var accounted = segmentBytes
        if let r = recycled {
            if rename(r.path, path) == 0 {
                fd = Posix.openWrite(path)
                code = errno
                accounted = r.accounted
                if fd >= 0 { counters.segmentsRecycled += 1 } else { unlink(path) }
            } else {
                code = errno
                unlink(r.path)
            }
            if fd < 0 { total -= r.accounted }
        } else {
            fd = Posix.create(path)
            code = errno
            if fd >= 0 { total += segmentBytes }
        }
        guard fd >= 0 else { return .failed(errno: code) }  // counted by commitFailure
        let wasEmpty = spools[key]!.segments.isEmpty
        spools[key]!.segments.append(Segment(start: start, filled: 0, accounted: accounted, seq: nextSeq))
        nextSeq += 1
        spools[key]!.active = true
        spools[key]!.fd = fd
        if wasEmpty { noteFirstSegment(of: key) }
        return .write(fd: fd, position: 0, room: segmentBytes)
    }

    /// Records `count` bytes written to the current segment; returns what the cursor must say.
    mutating func commitWrite(_ key: Int, _ count: Int) -> (cursorFD: Int32, cursor: SpoolCursor)? {
        // Copy out scalars only, so the in-place update below does not copy `segments`.
        let last: Int, cursorFD: Int32, dropped: UInt64, newEnd: UInt64
        do {
            guard let sp = spools[key], !sp.removed, sp.active, !sp.segments.isEmpty else { return nil }
            (last, cursorFD, dropped, newEnd) = (sp.segments.count - 1, sp.cursorFD, sp.dropped, sp.end + UInt64(count))
        }
        spools[key]!.segments[last].filled += count
        spools[key]!.end = newEnd
        counters.bytesWritten &+= UInt64(count)
        ProcessMetrics.spoolBytesWritten.increment(by: count)
        return (cursorFD, SpoolCursor(dropped: dropped, end: newEnd))
    }

    /// A failed write, in the store's counters and the metrics alike, and told to the
    /// store's observer (which logs it).
    mutating func countWriteError(_ error: SystemCallError) {
        counters.writeErrors += 1
        ProcessMetrics.spoolWriteErrors.increment()
        onWriteError?(error)
    }

    /// A write failed: the `count` bytes still pending in this append are lost, and so is
    /// everything before them (offsets stay consistent: `dropped = end`).
    mutating func commitFailure(_ key: Int, _ count: Int, _ error: SystemCallError) -> (cursorFD: Int32, cursor: SpoolCursor)? {
        guard let sp = spools[key], !sp.removed else { return nil }
        countWriteError(error)
        spools[key]!.end += UInt64(count)
        dropAllSegments(key, cause: .writeError)
        let now = spools[key]!
        return (now.cursorFD, SpoolCursor(dropped: now.dropped, end: now.end))
    }

    mutating func dropAllSegments(_ key: Int, cause: Cause) {
        guard let sp = spools[key] else { return }
        if sp.fd >= 0 { close(sp.fd) }
        for seg in sp.segments {
            unlink(sp.path(seg.start))
            total -= seg.accounted
        }
        countDropped(sp.end - sp.dropped, cause)
        spools[key]!.segments = []
        spools[key]!.dropped = sp.end
        spools[key]!.active = false
        spools[key]!.fd = -1
    }

    /// Only ever called on the writer's behalf (append/finish), so no descriptor is closed
    /// while the writer might still use it.
    mutating func closeWriterDescriptors(_ key: Int) {
        guard let sp = spools[key] else { return }
        if sp.fd >= 0 { close(sp.fd) }
        if sp.cursorFD >= 0 { close(sp.cursorFD) }
        spools[key]!.fd = -1
        spools[key]!.cursorFD = -1
        if sp.removed { spools[key] = nil }
    }

    /// End of writing: trims the current segment to its valid bytes (a recycled file may have
    /// stale bytes after them), releases its reservation, persists the cursor, closes fds.
    mutating func finish(_ key: Int) {
        guard let sp = spools[key] else { return }
        if sp.removed || sp.finished {
            closeWriterDescriptors(key)
            return
        }
        spools[key]!.finished = true
        if sp.active, let last = sp.segments.last {
            let i = sp.segments.count - 1
            if last.filled == 0 {
                unlink(sp.path(last.start))
                total -= last.accounted
                spools[key]!.segments.removeLast()
            } else if last.accounted > last.filled, ftruncate(sp.fd, off_t(last.filled)) == 0 {
                total -= last.accounted - last.filled
                spools[key]!.segments[i].accounted = last.filled
            }
        }
        spools[key]!.active = false
        let now = spools[key]!
        if now.cursorFD >= 0 {
            if !SpoolCursor(dropped: now.dropped, end: now.end).write(to: now.cursorFD) {
                countWriteError(SystemCallError(call: "pwrite \(sp.directory)/cursor", errno: errno))
            }
        }
        closeWriterDescriptors(key)
    }

    // MARK: removal

    /// Forgets the spool (if open) and deletes only owned files in its directory, then rmdir.
    mutating func remove(id: String, extra: Set<String>) {
        if let key = keys.removeValue(forKey: id), let sp = spools[key] {
            for seg in sp.segments {
                unlink(sp.path(seg.start))
                total -= seg.accounted
            }
            spools[key]!.segments = []
            spools[key]!.dropped = sp.end
            spools[key]!.active = false
            spools[key]!.removed = true
            spools[key]!.finished = true
            if sp.fd < 0 && sp.cursorFD < 0 { spools[key] = nil }  // else the writer closes and forgets it
        }
        let dir = directory + "/" + id
        guard let st = Posix.lstatInfo(dir), Posix.isDirectory(st) else { return }
        for name in Posix.listDirectory(dir) {
            let owned =
                name == "cursor" || Posix.parseSegmentName(name) != nil
                || extraOwnedFiles.contains(name) || extra.contains(name)
            guard owned, let fst = Posix.lstatInfo(dir + "/" + name), Posix.isRegular(fst) else { continue }
            unlink(dir + "/" + name)
        }
        rmdir(dir)
    }

    // MARK: reading

    struct Piece: Sendable {
        var path: String
        var fileOffset: Int
        var count: Int
        var segmentStart: UInt64
        var seq: Int64
    }

    struct ReadPlan: Sendable {
        var offset: UInt64
        var dropped: UInt64
        var end: UInt64
        var pieces: [Piece]
    }

    /// Which files/ranges hold `[max(offset, dropped), +limit)` right now.
    func planRead(_ key: Int, from offset: UInt64, limit: Int) -> ReadPlan? {
        guard let sp = spools[key], !sp.removed else { return nil }
        let o = min(max(offset, sp.dropped), sp.end)
        var plan = ReadPlan(offset: o, dropped: sp.dropped, end: sp.end, pieces: [])
        var remaining = Int(min(UInt64(limit), sp.end - o))
        guard remaining > 0 else { return plan }
        // Binary search: last segment with start <= o.
        var lo = 0, hi = sp.segments.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if sp.segments[mid].start <= o { lo = mid + 1 } else { hi = mid }
        }
        var i = lo - 1
        var cur = o
        while remaining > 0, i >= 0, i < sp.segments.count {
            let seg = sp.segments[i]
            let segEnd = seg.start + UInt64(seg.filled)
            guard seg.start <= cur, cur < segEnd else { break }
            let n = Int(min(UInt64(remaining), segEnd - cur))
            plan.pieces.append(
                Piece(
                    path: sp.path(seg.start), fileOffset: Int(cur - seg.start), count: n,
                    segmentStart: seg.start, seq: seg.seq))
            cur += UInt64(n)
            remaining -= n
            i += 1
        }
        return plan
    }

    /// Seqlock check after `pread`: all segments read are still the same incarnation.
    /// Returns the spool's current `dropped` if not (nil if the spool is gone).
    func validate(_ key: Int, _ pieces: [Piece]) -> (ok: Bool, dropped: UInt64, end: UInt64)? {
        guard let sp = spools[key], !sp.removed else { return nil }
        for p in pieces {
            guard sp.segments.contains(where: { $0.start == p.segmentStart && $0.seq == p.seq }) else {
                return (false, sp.dropped, sp.end)
            }
        }
        return (true, sp.dropped, sp.end)
    }
}
