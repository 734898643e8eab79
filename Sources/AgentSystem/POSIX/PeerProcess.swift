#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a unix socket, and which agent started this process: so a
/// second agent can name the one holding its socket path, and a command an agent started
/// never talks to another agent's socket by accident.
public enum PeerProcess {
    /// How many generations ``nearestAncestorRunningThisExecutable()`` looks up at most.
    public static let maxGenerations = 64

    /// The pid of the process at the other end of the connected unix socket `fd`
    /// (`SO_PEERCRED`); nil when it is not known (0: a process of another pid namespace).
    public static func of(socket fd: Int32) -> pid_t? {
        guard let pid = credentials(of: fd)?.pid, pid > 0 else { return nil }
        return pid
    }

    /// The pid and uid of the process at the other end of the connected unix socket `fd`
    /// (`SO_PEERCRED`); nil when they are not known.
    public static func credentials(of fd: Int32) -> (pid: pid_t, uid: uid_t)? {
        // `struct ucred` (pid, uid, gid: three 32-bit fields), which Glibc exports to Swift
        // only under _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return (credentials.pid, credentials.uid)
    }

    /// Whether the process `pid` of user `uid` may serve this process's agent socket: one of
    /// this process's own user or root, or (for root's commands, `sudo git` in a workspace
    /// whose agent runs as its user) the agent that started this process, its nearest
    /// ancestor running this executable. Another user of a shared `/tmp` could otherwise
    /// listen at the default path first and answer for the agent, with this very binary too.
    public static func mayServe(uid: uid_t, pid: pid_t) -> Bool {
        if uid == geteuid() || uid == 0 { return true }
        return pid > 0 && pid == nearestAncestorRunningThisExecutable()
    }

    /// Whether a socket file owned by `uid` may be the agent's: this user's or root's; for
    /// root any (its server is checked at the connect, ``mayServe(uid:pid:)``).
    public static func mayOwnAgentSocket(uid: uid_t) -> Bool {
        uid == geteuid() || uid == 0 || geteuid() == 0
    }

    /// The pid of the process listening at `path`, nil when nothing listens (or it is not known).
    public static func listening(at path: String) -> pid_t? {
        guard case .success(let fd) = UnixSocket.connect(path) else { return nil }
        defer { close(fd) }
        return of(socket: fd)
    }

    /// The nearest ancestor (parent, its parent, ...) that runs this process's own
    /// executable (the same file: device and inode), nil when none does within
    /// ``maxGenerations``: for a command the agent started, directly or through a shell, the agent.
    public static func nearestAncestorRunningThisExecutable() -> pid_t? {
        guard let own = executableIdentity("/proc/self/exe") else { return nil }
        var pid = getppid()
        for _ in 0..<maxGenerations {
            guard pid > 1 else { return nil }
            if executableIdentity("/proc/\(pid)/exe") == own { return pid }
            guard let parent = parentPID(of: pid) else { return nil }
            pid = parent
        }
        return nil
    }

    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    private static func executableIdentity(_ link: String) -> FileIdentity? {
        var info = stat()
        guard stat(link, &info) == 0 else { return nil }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    static func parentPID(of pid: pid_t) -> pid_t? { ProcStat.read(pid)?.parent }
}
