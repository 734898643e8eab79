/// Metadata of one segment file `<spool dir>/<16 hex digits of start>`.
///
/// File offset 0 holds logical offset `start`; the first `filled` bytes are valid.
/// `accounted` is what the store charges against `maxTotalBytes`: the full `segmentBytes`
/// while a segment may still be written (reserved up front, so concurrent writers cannot
/// overshoot), and the file's real size once finished or restored. A file's size never
/// exceeds its `accounted` bytes. `seq` is the store-wide age used for eviction; a recycled
/// file gets a fresh `seq`, which is also what readers re-check (seqlock) after `pread`.
struct Segment {
    var start: UInt64
    var filled: Int
    var accounted: Int
    var seq: Int64
}
