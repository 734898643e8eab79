/// Receives a child's output and exit from the ``ProcessWatcher`` (on its reactor's thread).
///
/// Calls arrive on that one thread, in order: output chunks, then (for the exit) a final
/// drain of whatever the shell wrote before `exited`. Implementations must not block.
protocol ProcessEventSink: AnyObject, Sendable {
    /// A chunk of combined stdout+stderr; the memory is only valid during the call.
    func output(_ bytes: UnsafeRawBufferPointer)
    /// If no byte still waiting can be kept or seen (nobody subscribed, the retained head
    /// full), calls `discard` with how many bytes the tail keeps: it drops what it may of the
    /// rest and returns how many. Runs under the same lock a subscriber takes to attach
    /// (none misses bytes); the dropped bytes count as written but not retained.
    func discardUnretained(_ discard: (_ keep: Int) -> Int)
    /// Where bytes nobody reads live go instead of /dev/null: the process's output spool.
    var spool: OutputSpool? { get }
    /// The pipe reached EOF (every writer, orphans included, closed it) or was closed by us.
    func outputClosed()
    /// The shell exited, as this status reports it (see ``ProcessWatcher/peekExit(_:)``).
    func exited(_ status: ExitStatus)
}
