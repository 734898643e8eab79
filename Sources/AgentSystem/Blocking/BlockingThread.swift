#if canImport(Glibc)
import Glibc
#endif

/// Whether the calling thread may block: a pool thread of the agent's own (``BlockingPool``'s
/// workers, the HTTP handler pool), never an event loop or Swift's cooperative pool. Work that
/// must not run on an event loop (a spawn's `vfork`, a record's write) runs inline on such a
/// thread instead of hopping to another one.
public enum BlockingThread {
    /// One thread-specific slot: non-nil on a marked thread (the value is never read).
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create")
        return key
    }()

    /// Marks the calling thread as one that may block, for the rest of its life. Only a pool's
    /// own threads call this.
    public static func markCurrent() {
        guard pthread_getspecific(key) == nil else { return }
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
    }

    /// True on a thread ``markCurrent()`` marked.
    public static var isCurrent: Bool { pthread_getspecific(key) != nil }
}
