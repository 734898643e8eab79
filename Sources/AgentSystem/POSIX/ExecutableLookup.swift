import CAgentSpawn
#if canImport(Glibc)
import Glibc
#endif

/// Finds a program as Go's `exec.LookPath` does: a name with a slash as it is (if it may be
/// executed), else the first executable match in `path`'s directories, an empty entry meaning
/// the current directory. A caller refuses a match relative to the current directory, as Go
/// does (the child would run whatever is in its own working directory).
public enum ExecutableLookup {
    public static func find(_ name: String, path: String?) -> String? {
        if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
        for dir in (path ?? "/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (dir.isEmpty ? "." : String(dir)) + "/" + name
            if agent_is_executable(candidate) == 1 { return candidate }
        }
        return nil
    }
}
