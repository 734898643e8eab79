#if canImport(Glibc)
import Glibc
#endif

/// RLIMIT_NOFILE handling: the agent needs two descriptors per child (pipe and pidfd)
/// plus its connections, so it raises its soft limit to the hard limit at start-up and
/// restores the original soft limit in each child, as Go programs do.
public enum FileDescriptorLimit {
    /// Raises the soft limit to the hard limit; returns the original soft limit.
    @discardableResult
    public static func raise() -> Int? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let original = Int(limit.rlim_cur)
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        return original
    }
}
