/// Receives a child's output and exit from the ``ProcessReactor`` thread.
///
/// Calls arrive on that one thread, in order: output chunks, then (for the exit) a final
/// drain of whatever the shell wrote before `exited`. Implementations must not block.
protocol ProcessEventSink: AnyObject, Sendable {
    /// A chunk of combined stdout+stderr; the memory is only valid during the call.
    func output(_ bytes: UnsafeRawBufferPointer)
    /// `pending` bytes wait in the pipe. If none of them can be kept or seen (nobody
    /// subscribed, the retained head full), lets `discard` drop up to all but the tail's
    /// worth, under the same lock a subscriber takes to attach (none misses bytes); the
    /// dropped bytes count as written but not retained.
    func discardUnretained(pending: Int, _ discard: (Int) -> Int)
    /// The pipe reached EOF (every writer, orphans included, closed it) or was closed by us.
    func outputClosed()
    /// The shell exited with this raw wait status.
    func exited(waitStatus: Int32)
}
