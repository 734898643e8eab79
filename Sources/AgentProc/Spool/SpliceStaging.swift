import CAgentSpawn
import Glibc

/// The process reactor's staging pipe for moving output nobody reads live into a spool
/// without a pass through user space (`agent_pipe_splice_staged`): the source pipe's lock is
/// held only while page references move, not across the copy into the page cache, so the
/// child keeps writing meanwhile. Empty between calls; used by the reactor thread alone.
struct SpliceStaging: Sendable {
    let readEnd: Int32
    let writeEnd: Int32
    /// /dev/null, where bytes that could not reach the spool are dropped (owned by the reactor).
    let nullfd: Int32

    /// Room asked for: the size of the children's output pipes, so one call can take all
    /// that a pipe holds. Bound: the pipe pins at most this much, and only during a call.
    static let size: Int32 = 1 << 20

    /// nil when no pipe can be made (the reactor then reads and writes instead).
    init?(nullfd: Int32) {
        var fds: [Int32] = [-1, -1]
        guard agent_staging_pipe(&fds, Self.size) == 0 else { return nil }
        readEnd = fds[0]
        writeEnd = fds[1]
        self.nullfd = nullfd
    }

    /// Closes both ends (not `nullfd`, which the reactor closes).
    func close() {
        _ = Glibc.close(readEnd)
        _ = Glibc.close(writeEnd)
    }
}
