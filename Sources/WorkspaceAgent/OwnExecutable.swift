import AgentCore
#if canImport(Glibc)
import Glibc
#endif

/// The running binary and its place on `PATH`, as the reference's `coder agent` sets it.
enum OwnExecutable {
    /// The binary's path from `/proc/self/exe` (links resolved, as Go's `os.Executable`).
    static func path() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        var text = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasSuffix(" (deleted)") { text.removeLast(" (deleted)".count) }
        return text
    }

    /// The directory holding the binary.
    static func directory() -> String? {
        guard let path = path(), let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// `PATH` with `directory` appended (`<PATH>:<dir>`); unset or empty, the directory alone
    /// (the reference's `:<dir>` would put the working directory first); unchanged when its
    /// last entry already is the directory.
    static func path(_ current: String?, appending directory: String) -> String {
        guard let current, !current.isEmpty else { return directory }
        if current.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) == directory { return current }
        return current + ":" + directory
    }
}
