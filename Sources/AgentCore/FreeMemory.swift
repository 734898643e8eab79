import CAgentSpawn
import Synchronization

/// Gives freed heap memory back to the OS after a burst of frees.
///
/// glibc keeps what a program frees for reuse. Measured (debug build, 3072 WebSockets and
/// 1024 refused handshakes, then all closed): 36 MiB at start, about 150 MiB with them open,
/// and 166 MiB still resident 3 s after they closed; the next two bursts reused that memory
/// (no growth), so it is free heap, not a leak. With a trim after the burst: 73–76 MiB after
/// closing. What stays (about 40 MiB) sits in the two event-loop threads' malloc arenas,
/// pages that still hold some live allocation (fragmentation), and is reused by the next
/// burst. `malloc_trim(0)` returns the free pages of every arena. It walks the heap
/// (milliseconds), so it runs off the event loops, one at a time.
public enum FreeMemory {
    private static let running = Atomic(false)

    /// Trims the heap a moment from now (after the closing connections' buffers are freed),
    /// unless a trim is already under way.
    public static func releaseSoon(after delay: Duration = .milliseconds(500)) {
        guard running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        Task.detached(priority: .background) {
            try? await Task.sleep(for: delay)
            agent_release_free_memory()
            running.store(false, ordering: .releasing)
        }
    }
}
