import CAgentSpawn

/// Once start-up is over, the agent stops counting the code and constants it ran only
/// then: ``releaseAfterStartup(delay:)`` reclaims its clean read-only file pages (the
/// binary's text, the Swift runtime, libgit2, ...) with MADV_PAGEOUT, as memory pressure
/// would. Nothing private or writable is touched. Pages no other process maps leave the
/// page cache, so code used again is read back on first touch (major faults: the first
/// request afterwards took 9 ms here). Measured by `agent-bench proc` (idle RSS); without
/// it, fault-around keeps 64 KiB around every page start-up touched.
public enum StartupPages {
    /// Sleeps `delay` (start-up done: listeners bound, modules started), then releases.
    /// Returns at once if cancelled.
    public static func releaseAfterStartup(delay: Duration = .seconds(2)) async {
        do { try await Task.sleep(for: delay) } catch { return }
        _ = agent_release_file_pages()
    }
}
