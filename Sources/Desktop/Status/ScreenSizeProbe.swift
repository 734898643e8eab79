import Synchronization

/// The X server's screen size for the status route, one read at a time: concurrent status
/// requests share the read under way, so however many arrive, at most one thread of the
/// shared pool waits on the X server (about ``XScreenReader/timeout`` at most: a setup
/// reply is a few kilobytes).
final class ScreenSizeProbe: Sendable {
    private let inFlight = Mutex<(display: Int, task: Task<DisplayGeometry?, Never>)?>(nil)

    /// The size of `display`'s screen, or nil when the X server cannot tell.
    func size(display: Int) async -> DisplayGeometry? {
        let task = inFlight.withLock { current -> Task<DisplayGeometry?, Never> in
            if let current, current.display == display { return current.task }
            let task = Task<DisplayGeometry?, Never> {
                try? await XScreenReader.offPool { () throws(DesktopError) in try XScreenReader.screen(display: display) }
            }
            current = (display, task)
            return task
        }
        let size = await task.value
        // The next request reads afresh (a viewer may resize the screen).
        inFlight.withLock { current in
            if let running = current, running.task == task { current = nil }
        }
        return size
    }
}
