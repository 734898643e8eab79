import CAgentSpawn
#if canImport(Glibc)
import Glibc
#endif

/// One description of a child to start, used by every capability (the process API, scripts,
/// MCP servers, the desktop's programs, SSH and PTY sessions): what to run, with which
/// descriptors, in which group or session, and when it is reaped.
public struct ChildSpec: Sendable {
    /// The process group the child gets: one it leads (so the whole tree it starts can be
    /// signalled), or the caller's.
    public enum Grouping: Sendable, Equatable {
        /// `setsid()`: a session and group of its own (what shells of sessions need).
        case newSession
        /// A new process group in the agent's session.
        case newGroup
        /// The caller's own group: for a program a short-lived command runs in the foreground
        /// of its caller's terminal (the git helpers' `ssh`). Such a child is only ever
        /// signalled alone.
        case callersGroup
    }

    /// The program (absolute, or relative to ``directory``).
    public var executable: String
    /// `argv`, its first element included.
    public var arguments: [String]
    /// `NAME=value` strings: the child's whole environment.
    public var environment: [String]
    /// A block built before, used instead of ``environment`` when set: a start that reuses
    /// one (the process API's) skips converting the strings.
    public var environmentBlock: EnvironmentBlock?
    /// Working directory; nil keeps the agent's.
    public var directory: String?
    /// The child's fd 0; -1: /dev/null.
    public var input: Int32 = -1
    /// The child's fd 1 (and 2 when ``errors`` is -1); -1: /dev/null.
    public var output: Int32 = -1
    /// The child's fd 2; -1: the same as ``output``.
    public var errors: Int32 = -1
    public var grouping: Grouping = .newGroup
    /// fd 0 (a terminal) becomes the controlling terminal of the new session.
    public var controllingTerminal = false
    /// `oom_score_adj` and nice for the child; nil leaves the agent's.
    public var oomScoreAdj: Int32?
    public var nice: Int32?
    /// The RLIMIT_NOFILE soft limit for the child; nil leaves the agent's (which raises its
    /// own, so the process API restores the original for its shells).
    public var fileLimit: Int?
    /// Sent to the child when the agent dies (0: none). Such a child is spawned on the
    /// reactor's thread (the signal is tied to the spawning thread, and that one lives as long
    /// as the agent): use ``ChildReactor/spawnOnReactor(_:)``.
    public var parentDeathSignal: Int32 = 0
    public var reaping: ChildLife.Reaping = .atExit

    public init(
        executable: String, arguments: [String], environment: [String], directory: String? = nil,
        input: Int32 = -1, output: Int32 = -1, errors: Int32 = -1, grouping: Grouping = .newGroup,
        reaping: ChildLife.Reaping = .atExit
    ) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.input = input
        self.output = output
        self.errors = errors
        self.grouping = grouping
        self.reaping = reaping
    }

    /// An environment dictionary as `NAME=value` strings, sorted by name.
    public static func environment(_ variables: [String: String]) -> [String] {
        variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }
}

/// A child that could not start: which step failed and the child's errno.
public struct ChildSpawnError: Error, Sendable, CustomStringConvertible {
    public enum Step: Sendable, Equatable {
        /// `fork` is the clone itself; `start` any other step before the exec.
        case start, fork, directory, exec
    }

    public var step: Step
    public var errno: Int32

    public init(step: Step, errno: Int32) {
        self.step = step
        self.errno = errno
    }

    public var description: String { description(executable: nil, directory: nil) }

    /// Go's words (`chdir /dir: ...`, `fork/exec /bin/x: ...`), naming what failed when given.
    public func description(executable: String?, directory: String?) -> String {
        let reason = SystemCallError.message(errno)
        switch step {
        case .directory: return "chdir\(directory.map { " " + $0 } ?? ""): \(reason)"
        case .exec: return "fork/exec\(executable.map { " " + $0 } ?? ""): \(reason)"
        case .start, .fork: return "start: \(reason)"
        }
    }
}

/// The pipes a child's stdio is made of, close-on-exec from creation (so no child spawned
/// meanwhile by another thread inherits an end and holds it open).
public enum ChildPipe {
    /// A pipe for a child's output: the read end (the agent's) non-blocking; `size` bytes of
    /// room when > 0. Nil with errno set on failure.
    public static func output(size: Int32 = 0) -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard agent_output_pipe(&fds, size) == 0 else { return nil }
        return (fds[0], fds[1])
    }

    /// A pipe for a child's input: the write end (the agent's) non-blocking. Nil on failure.
    public static func input() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        guard agent_input_pipe(&fds) == 0 else { return nil }
        return (fds[0], fds[1])
    }
}
