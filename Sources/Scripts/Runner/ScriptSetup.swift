import AgentCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The files and directories a run needs, made before it starts.
enum ScriptSetup {
    /// `<data dir>/coder-script-data/<log source id>`, created (0700) before each run.
    static func dataDirectory(root: String, logSourceID: [UInt8]) throws(ScriptCommand.SetupError) -> String {
        let path = root + "/" + UUIDText.format(logSourceID)
        try makeDirectories(path)
        return path
    }

    /// The log file's path: empty → `coder-script-<log source id>.log`; a leading `~` is the
    /// home directory; `$VAR` expanded against the agent's environment; relative → under
    /// the log dir.
    static func logPath(
        _ configured: String, logSourceID: [UInt8], logDirectory: String, home: String,
        environment: [String: String]
    ) -> String {
        var path = configured.isEmpty ? "coder-script-\(UUIDText.format(logSourceID)).log" : configured
        if path.hasPrefix("~") {
            let rest = path.dropFirst().drop { $0 == "/" }
            path = home.hasSuffix("/") ? home + rest : home + "/" + rest
        }
        path = PathExpansion.expand(path, environment: environment)
        if !path.hasPrefix("/") { path = logDirectory + "/" + path }
        return path
    }

    /// Opens the log file (parent directories created 0700, the file 0600), truncated: each
    /// run's file holds that run's output only (the reference writes from offset 0 without
    /// truncating, leaving a longer earlier run's tail behind).
    static func openLog(_ path: String) throws(ScriptCommand.SetupError) -> Int32 {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        // Without blocking, and never a FIFO: one at the log's path (a script may make one)
        // would block the open until a reader came, and its writes the reactor. A device
        // (`/dev/null`, as templates use) is fine, as in the reference.
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            throw ScriptCommand.SetupError(description: "open \(path) script log file: \(SystemCallError.message(errno))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) != S_IFIFO else {
            close(fd)
            throw ScriptCommand.SetupError(description: "open \(path) script log file: a FIFO, which a run would block on")
        }
        let flags = fcntl(fd, F_GETFL)
        let regular = (info.st_mode & S_IFMT) == S_IFREG
        guard !regular || ftruncate(fd, 0) == 0, flags >= 0, fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
            let message = SystemCallError.message(errno)
            close(fd)
            throw ScriptCommand.SetupError(description: "open \(path) script log file: \(message)")
        }
        return fd
    }

    /// `mkdir -p` with mode 0700 for what it creates.
    static func makeDirectories(_ path: String) throws(ScriptCommand.SetupError) {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw ScriptCommand.SetupError(description: "mkdir \(prefix): \(SystemCallError.message(errno))")
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw ScriptCommand.SetupError(description: "mkdir \(path): not a directory")
        }
    }

    /// Links `<bin dir>/coder` to the agent's own binary when no `coder` is on the agent's
    /// PATH and nothing is at that name yet, so that templates written for Coder's docs
    /// (`coder exp sync want a b`) work: run as `coder`, the agent accepts `exp sync`.
    /// Returns what it did, for the log; never replaces a file it did not make.
    static func linkCoder(binDirectory: String, agentPath: String?) -> String? {
        guard ScriptCommand.resolve("coder", path: agentPath) == nil else { return nil }
        let link = binDirectory + "/coder"
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        let target = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var existing = [CChar](repeating: 0, count: 4096)
        let m = readlink(link, &existing, existing.count - 1)
        if m > 0 {
            // Ours from an earlier start (the binary may have moved: relink only our own).
            let current = String(decoding: existing[0..<m].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard current != target, current.hasSuffix("/workspace-agent") else { return nil }
            unlink(link)
        } else if access(link, F_OK) == 0 {
            return nil
        }
        guard symlink(target, link) == 0 else { return nil }
        return link
    }
}
