import AgentCore
import CAgentSpawn
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What to run: always `sh -c <command>`.
struct SpawnRequest: Sendable {
    var command: String
    /// nil or empty keeps the agent's working directory.
    var workdir: String?
    var environment: EnvironmentBlock
    var priority: ProcessPriority
    /// RLIMIT_NOFILE soft limit to restore in the child (the agent raises its own).
    var childNofileSoft: Int?
    /// What the child's stdin is.
    var input: SpawnInput = .none
}

/// A child's stdin: /dev/null (the reference), a pipe, or a pseudo-terminal that is also its
/// stdout, stderr and controlling terminal.
enum SpawnInput: Sendable, Equatable {
    case none
    case pipe
    case terminal(rows: UInt16, cols: UInt16)
}

/// A started child: the reactor takes ownership of both descriptors.
struct SpawnedChild: Sendable {
    var pid: pid_t
    var pidfd: Int32
    var outputFD: Int32
    /// The agent's end of the child's stdin (non-blocking; for a terminal, a second
    /// descriptor of its primary side), or -1 for /dev/null.
    var inputFD: Int32 = -1
}

/// Why a spawn failed; `description` is the reference's `detail` text.
struct SpawnError: Error, CustomStringConvertible {
    var description: String
    /// The shell's exec failed for want of the file (removed, or not executable any more).
    var shellMissing = false
}

/// Starts shells through the agent's one spawn path (``ChildSpec``,
/// ``ChildReactor/startUnwatched(_:)``): new process group, clean signal state, stdin from
/// /dev/null (or a pipe), stdout+stderr on one pipe; or a new session on a pseudo-terminal.
enum ProcessSpawner {
    /// Kernel pipe size requested for output: 1 MiB (the unprivileged maximum) so a fast
    /// writer rarely waits on the reader.
    static let pipeSize: Int32 = 1 << 20

    /// The last `sh` resolved, with the PATH it was resolved against (a cache: the lookup
    /// costs a stat per PATH entry on every start otherwise).
    private static let shellCache = Mutex<(path: String?, shell: String)?>(nil)

    /// Looks `sh` up on `agentPath` and caches it. Like Go's exec.LookPath (which the
    /// reference's `exec.Command` uses), a first match relative to the current directory
    /// (an empty or relative PATH entry) is refused: the child would run it from its own
    /// working directory, whatever is there.
    private static func resolveShell(agentPath: String?) throws(SpawnError) -> String {
        guard let shell = ExecutableLookup.find("sh", path: agentPath) else {
            throw SpawnError(description: "start process: exec: \"sh\": executable file not found in $PATH")
        }
        guard shell.hasPrefix("/") else {
            throw SpawnError(description: "start process: exec: \"sh\": cannot run executable found relative to current directory")
        }
        shellCache.withLock { $0 = (agentPath, shell) }
        return shell
    }

    /// Starts `sh -c command` with the cached `sh` (not checked first: a check cost a
    /// system call per start); if that `sh` has gone (its exec failed for want of the
    /// file), the cache is dropped and `sh` looked up again.
    static func spawn(_ request: SpawnRequest, agentPath: String?) throws(SpawnError) -> SpawnedChild {
        if let cached = shellCache.withLock({ $0 }), cached.path == agentPath {
            do {
                return try spawn(request, shell: cached.shell)
            } catch  where error.shellMissing {
                // Only this entry: another start may have cached a newer one meanwhile.
                shellCache.withLock { if $0?.path == agentPath && $0?.shell == cached.shell { $0 = nil } }
                let shell = try resolveShell(agentPath: agentPath)
                // The same file, whose exec has just failed: a second spawn would fail alike.
                if shell == cached.shell { throw error }
                return try spawn(request, shell: shell)
            }
        }
        return try spawn(request, shell: try resolveShell(agentPath: agentPath))
    }

    private static func spawn(_ request: SpawnRequest, shell: String) throws(SpawnError) -> SpawnedChild {
        // fds[0]: the agent's read end of the output; fds[1]: the child's output (stdout and
        // stderr); input: the child's stdin (agent end, child end); -1 where unused.
        var fds: [Int32] = [-1, -1]
        var input: [Int32] = [-1, -1]
        var terminal = false
        switch request.input {
        case .terminal(let rows, let cols):
            var primary: Int32 = -1
            var secondary: Int32 = -1
            guard agent_open_pty(&primary, &secondary, rows, cols) == 0 else {
                throw SpawnError(description: "start process: " + SystemCallError(call: "open pty", errno: errno).description)
            }
            let writer = fcntl(primary, F_DUPFD_CLOEXEC, 3)
            guard writer >= 0 else {
                let code = errno
                close(primary)
                close(secondary)
                throw SpawnError(description: "start process: " + SystemCallError(call: "dup", errno: code).description)
            }
            fds = [primary, secondary]
            input = [writer, secondary]
            terminal = true
        case .pipe, .none:
            guard agent_output_pipe(&fds, pipeSize) == 0 else {
                throw SpawnError(description: "start process: " + SystemCallError(call: "pipe", errno: errno).description)
            }
            if request.input == .pipe {
                var pair: [Int32] = [-1, -1]
                guard agent_input_pipe(&pair) == 0 else {
                    let code = errno
                    close(fds[0])
                    close(fds[1])
                    throw SpawnError(description: "start process: " + SystemCallError(call: "pipe", errno: code).description)
                }
                // Agent end first, as for the terminal.
                input = [pair[1], pair[0]]
            }
        }
        /// Closes the child's ends (after the spawn) or everything (on failure).
        func closeChildEnds() {
            close(fds[1])
            if input[1] >= 0 && input[1] != fds[1] { close(input[1]) }
        }
        // The agent's one spawn path (``ChildSpec``), which registers the shell in
        // ``OwnedChildren`` before it runs.
        var spec = ChildSpec(
            executable: shell, arguments: ["sh", "-c", request.command], environment: [],
            directory: request.workdir.flatMap { $0.isEmpty ? nil : $0 }, input: input[1], output: fds[1],
            grouping: terminal ? .newSession : .newGroup)
        spec.environmentBlock = request.environment
        spec.controllingTerminal = terminal
        spec.oomScoreAdj = request.priority.oomScoreAdj
        spec.nice = request.priority.nice
        spec.fileLimit = request.childNofileSoft
        let started: (pid: pid_t, pidfd: Int32)
        do {
            started = try ChildReactor.startUnwatched(spec)
        } catch {
            closeChildEnds()
            close(fds[0])
            if input[0] >= 0 { close(input[0]) }
            let reason = SystemCallError.message(error.errno)
            switch error.step {
            case .directory:
                throw SpawnError(description: "start process: chdir \(request.workdir ?? ""): \(reason)")
            case .exec:
                let missing = [ENOENT, ENOTDIR, EACCES, ELOOP].contains(error.errno)
                throw SpawnError(description: "start process: fork/exec \(shell): \(reason)", shellMissing: missing)
            case .fork:
                throw SpawnError(description: "start process: fork: \(reason)")
            case .start:
                throw SpawnError(description: "start process: \(reason)")
            }
        }
        closeChildEnds()
        let pid = started.pid
        let pidfd = started.pidfd >= 0 ? started.pidfd : agent_pidfd_open(pid)
        guard pidfd >= 0 else {
            let reason = SystemCallError(call: "pidfd_open", errno: errno).description
            kill(-pid, Int32(SIGKILL))
            OwnedChildren.reap(pid, wait: true)
            close(fds[0])
            if input[0] >= 0 { close(input[0]) }
            throw SpawnError(description: "start process: \(reason)")
        }
        return SpawnedChild(pid: pid, pidfd: pidfd, outputFD: fds[0], inputFD: input[0])
    }
}
