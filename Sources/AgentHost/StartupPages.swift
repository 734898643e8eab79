import CAgentSpawn

/// Once start-up is over, the agent stops counting the code and constants it ran only
/// then: ``releaseAfterStartup(delay:)`` reclaims its clean read-only file pages (the
/// binary's text, the Swift runtime, libgit2, ...) with MADV_PAGEOUT, as memory pressure
/// would, and drops its own mapping of the loaded objects' pages that other processes keep
/// (MADV_DONTNEED: the page cache keeps them, a later touch is a minor fault). Nothing
/// private or writable is touched: a mapping with a single anonymous (written) page is
/// left whole, and pages are dropped only in the read-only segments of objects the
/// dynamic loader lists, under its lock, so a library loaded meanwhile (the desktop's
/// libvncclient, NSS modules) loses nothing. Pages no other process maps leave the page
/// cache, so code used again is read back on first touch: the first request afterwards
/// took 13–25 ms here (5–12 ms with the page-out alone); it happens once, after start-up.
/// Measured by `agent-bench proc` (idle RSS); without it, fault-around keeps 64 KiB around
/// every page start-up touched, and every library page another Swift process shares stays
/// counted (idle RSS 29.7 MiB against 10.1 MiB).
public enum StartupPages {
    /// Sleeps `delay` (start-up is normally over by then: listeners bound, modules
    /// started; on a busy host it may not be, which is safe), then releases. Returns at
    /// once if cancelled.
    public static func releaseAfterStartup(delay: Duration = .seconds(2)) async {
        do { try await Task.sleep(for: delay) } catch { return }
        releaseNow()
    }

    /// Releases now; the number of mappings paged out (-1 if /proc cannot be read).
    @discardableResult
    public static func releaseNow() -> Int {
        Int(agent_release_file_pages())
    }
}
