import CAgentSpawn

/// Once start-up is over, the agent stops counting the code and constants it ran only
/// then: ``releaseAfterStartup(delay:)`` advises every read-only file mapping (the binary's
/// text, Foundation, ICU data, libgit2, ...) out of the resident set with MADV_PAGEOUT.
/// Nothing private or writable is touched, the pages stay in the page cache, and code still
/// in use faults back in at first touch (minor faults, no I/O). Measured by
/// `agent-bench proc` (idle RSS); without it, fault-around maps 64 KiB around every page
/// start-up touched.
public enum StartupPages {
    /// Sleeps `delay` (start-up done: listeners bound, modules started), then releases.
    /// Returns at once if cancelled.
    public static func releaseAfterStartup(delay: Duration = .seconds(2)) async {
        do { try await Task.sleep(for: delay) } catch { return }
        _ = agent_release_file_pages()
    }
}
