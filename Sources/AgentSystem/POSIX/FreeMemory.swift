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
