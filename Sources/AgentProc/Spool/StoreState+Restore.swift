import AgentCore
import Synchronization
import Glibc

extension StoreState {
    /// Rebuilds a spool left by an earlier process (it may have been SIGKILLed) from its
    /// `cursor` and segment files, trusting nothing:
    /// - cursor missing, short, wrong magic/checksum or `dropped > end` → nil;
    /// - segment files (regular files named by 16 hex digits) starting at or after `end`
    ///   (a recycled file renamed in before its first cursor update) are deleted;
    /// - walking back from `end`, segments must be contiguous and long enough; at the first
    ///   gap or short file the walk stops and everything before it counts as dropped (so a
    ///   missing/truncated segment only raises `dropped`, never yields wrong bytes);
    /// - kept files are truncated to their valid bytes (a recycled file's stale tail), files
    ///   entirely before the new `dropped` are deleted; unknown names are left alone.
    /// The result is a finished, read-only spool counted toward the total cap (which is
    /// enforced at once by evicting the globally oldest segments).
    mutating func restore(id: String) -> Int? {
        if let key = keys[id] { return key }
        let dir = directory + "/" + id
        guard Posix.isValidID(id), let dst = Posix.lstatInfo(dir), Posix.isDirectory(dst) else { return nil }

        // Cursor.
        let cfd = Posix.openRead(dir + "/cursor")
        guard cfd >= 0 else { return nil }
        var raw = [UInt8](repeating: 0, count: SpoolCursor.size)
        let got = raw.withUnsafeMutableBytes { Posix.preadAll(cfd, $0.baseAddress!, $0.count, 0) }
        close(cfd)
        // No output comes near 2^62 bytes (4 EiB): a cursor past it is not ours, and the
        // offsets and counts computed from it (Int) would overflow.
        guard got, let cursor = SpoolCursor.decode(raw), cursor.end <= 1 << 62, cursor.dropped <= cursor.end else { return nil }

        // Segment files.
        struct Found { var start: UInt64; var size: Int; var mtime: Int64 }
        var found: [Found] = []
        for name in Posix.listDirectory(dir) {
            guard let start = Posix.parseSegmentName(name), let st = Posix.lstatInfo(dir + "/" + name),
                Posix.isRegular(st)
            else { continue }
            found.append(Found(start: start, size: st.size, mtime: st.modifiedNanoseconds))
        }
        found.sort { $0.start < $1.start }

        // Walk back from `end` while segments are contiguous and cover what is needed.
        var kept: [(found: Found, filled: Int)] = []
        var coveredFrom = cursor.end
        var doomed: [UInt64] = []
        var walking = true
        for f in found.reversed() {
            if f.start >= cursor.end || !walking {
                doomed.append(f.start)
                continue
            }
            if coveredFrom <= cursor.dropped || f.start >= coveredFrom
                || f.start.addingReportingOverflow(UInt64(f.size)).partialValue < coveredFrom
            {
                walking = false
                doomed.append(f.start)
                continue
            }
            kept.append((f, Int(coveredFrom - f.start)))
            coveredFrom = f.start
        }
        kept.reverse()
        let dropped = max(cursor.dropped, coveredFrom)
        for start in doomed { unlink(dir + "/" + Posix.segmentName(start)) }

        var sp = SpoolState(id: id, directory: dir)
        sp.dropped = dropped
        sp.end = cursor.end
        sp.finished = true
        var lastSeq = Int64.min
        var bytes = 0
        for (f, filled) in kept {
            var accounted = f.size
            if f.size > filled {
                let fd = Posix.openWrite(dir + "/" + Posix.segmentName(f.start))
                if fd >= 0 {
                    if ftruncate(fd, off_t(filled)) == 0 { accounted = filled }
                    close(fd)
                }
            }
            // Restored segments are older than any segment of this process: negative seqs,
            // ordered by mtime and strictly increasing within the spool.
            let seq = max(Int64.min + 1 + max(0, f.mtime), lastSeq + 1)
            lastSeq = seq
            sp.segments.append(Segment(start: f.start, filled: filled, accounted: accounted, seq: seq))
            bytes += accounted
        }
        if sp.segments.isEmpty { sp.dropped = sp.end }

        let key = nextKey
        nextKey += 1
        keys[id] = key
        spools[key] = sp
        total += bytes
        noteFirstSegment(of: key)
        _ = enforceTotalCap(reserving: 0, allowRecycle: false)
        return key
    }
}
