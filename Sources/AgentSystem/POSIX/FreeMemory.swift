import CAgentSpawn
import Synchronization

/// Gives freed heap memory back to the OS after a burst of frees.
///
/// glibc keeps what a program frees for reuse. Measured (release build, `agent-bench
/// hardening --only burst`: 3072 WebSockets and 500 idle connections, then all closed):
/// 32 MiB at start, about 155 MiB with them open, and 92 MiB still resident after they
/// closed; one `malloc_trim(0)` then brought it to 38 MiB, so it was free heap, not a leak.
/// `malloc_trim(0)` returns the free pages of every arena. It walks the heap (milliseconds),
/// so it runs off the event loops, one at a time.
public enum FreeMemory {
    /// Allocations this large or larger are their own mappings, returned to the system when
    /// freed; and each arena's free top beyond ``trimThreshold`` is returned at once.
    ///
    /// glibc raises both thresholds after each large free (up to 32 MiB and 64 MiB), and
    /// `malloc_trim` never trims the top of a thread's arena. Measured (debug build, sixteen
    /// MCP servers each sending a 15 MiB message, then removed): idle 34 MiB, 272 MiB at the
    /// peak, 209 MiB for good after, in sixteen arenas that `malloc_trim` left alone; with the
    /// thresholds fixed: idle 39 MiB, 141 MiB at the peak, 68 MiB after.
    public static let mmapThreshold = 1 << 20
    public static let trimThreshold = 2 << 20

    /// Fixes glibc's thresholds (``mmapThreshold``, ``trimThreshold``); the daemon calls it
    /// once at start.
    public static func configureAllocator() {
        _ = agent_configure_malloc(Int32(mmapThreshold), Int32(trimThreshold))
    }

    /// Whether a trim is scheduled, and whether another was asked for since it was.
    private struct Pending {
        var scheduled = false
        var again = false
    }

    private static let pending = Mutex(Pending())

    /// Trims after the last request, at 4×, 16× and 64× the delay (2 s, 8 s and 32 s by
    /// default): each costs milliseconds, so a burst's close costs at most four trims.
    static let settleTrims = 3

    /// Trims the heap a moment from now (after the closing connections' buffers are freed).
    /// A request while a trim is scheduled is not lost: one more trim follows `delay` after
    /// it, so the last trim comes after the last request (at most one trim per `delay`).
    public static func releaseSoon(after delay: Duration = .milliseconds(500)) {
        let start = pending.withLock { p -> Bool in
            if p.scheduled {
                p.again = true
                return false
            }
            p.scheduled = true
            return true
        }
        guard start else { return }
        Task.detached(priority: .background) {
            // Bounded: each round needs a request made during the previous one; after the
            // last, `settleTrims` more follow at growing intervals, because what closing
            // connections hold (their tasks, subscriptions and buffers) is freed over the
            // seconds after the count that asked for the trim fell.
            var settle = 0
            var wait = delay
            while true {
                try? await Task.sleep(for: wait)
                agent_release_free_memory()
                let more = pending.withLock { p -> Bool in
                    if p.again {
                        p.again = false
                        return true
                    }
                    return false
                }
                if more {
                    settle = 0
                    wait = delay
                    continue
                }
                if settle == settleTrims {
                    let done = pending.withLock { p -> Bool in
                        if p.again { return false }
                        p.scheduled = false
                        return true
                    }
                    if done { return }
                    settle = 0
                    wait = delay
                    continue
                }
                settle += 1
                wait = wait * 4
            }
        }
    }
}
