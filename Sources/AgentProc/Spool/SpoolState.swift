/// Per-spool metadata, kept inside the store's single `Mutex` so that a writer evicting
/// another spool's segment and that spool's own writer always agree.
///
/// Invariant: `segments` are sorted by `start`, contiguous, and cover exactly
/// `[dropped, end)` (the first may start before `dropped` only after a restore);
/// `segments` is empty iff `dropped == end`. While `active`, the last segment is the one the
/// writer has open (`fd`) and it is never evicted by others.
struct SpoolState {
    let id: String
    let directory: String
    var segments: [Segment] = []
    var dropped: UInt64 = 0
    var end: UInt64 = 0
    /// The writer's current segment is open and is the last element of `segments`.
    var active = false
    /// No more appends (finish() called, restored spool, or removed).
    var finished = false
    /// `remove(id:)` ran; the files are gone and the writer must only close its descriptors.
    var removed = false
    /// Descriptor of the current segment (-1 when none); only the writer thread uses/closes it.
    var fd: Int32 = -1
    /// Descriptor of the `cursor` file while writable (-1 otherwise).
    var cursorFD: Int32 = -1

    init(id: String, directory: String) {
        self.id = id
        self.directory = directory
    }

    func path(_ start: UInt64) -> String { directory + "/" + Posix.segmentName(start) }
}
