import AgentSystem
import CAgentSpawn
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The short commands the git helpers run in the caller's process (`ssh -G`, `git
/// rev-parse`, `ssh` itself): found on `PATH`, with the caller's environment.
enum LocalCommand {
    /// Runs `argv` with stdin and stderr on /dev/null and returns its exit status and at most
    /// `maxBytes` of its stdout; nil when it cannot start, outlives `timeout` (then killed)
    /// or does not exit normally.
    static func capture(_ argv: [String], maxBytes: Int, timeout: Duration) -> (status: Int32, output: [UInt8])? {
        var pipeEnds: [Int32] = [-1, -1]
        guard agent_output_pipe(&pipeEnds, 0) == 0 else { return nil }
        // Blocking reads after poll: the pipe is made non-blocking.
        _ = fcntl(pipeEnds[0], F_SETFL, fcntl(pipeEnds[0], F_GETFL) & ~O_NONBLOCK)
        let devNull = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { if devNull >= 0 { close(devNull) } }
        guard let pid = spawn(argv, stdin: devNull, stdout: pipeEnds[1], stderr: devNull) else {
            close(pipeEnds[0])
            close(pipeEnds[1])
            return nil
        }
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var timedOut = false
        while true {
            let left = deadline - clock.now
            guard left > .zero else { timedOut = true; break }
            var entry = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000)))
            if ready < 0, errno == EINTR { continue }
            if ready == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress!, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            if output.count < maxBytes { output += chunk[0..<min(n, maxBytes - output.count)] }
        }
        if timedOut { kill(pid, SIGKILL) }
        let status = waitForExit(pid)
        guard !timedOut, let status, status & 0x7f == 0 else { return nil }
        return ((status >> 8) & 0xff, output)
    }

    /// Runs `argv` on the caller's stdin, stdout and stderr and returns its wait status;
    /// SIGINT, SIGTERM and SIGHUP that reach this process meanwhile are passed on to it (so
    /// the caller's clean-up runs after it has ended). Nil when it cannot start.
    static func runForwardingSignals(_ argv: [String]) -> Int32? {
        let forwarded = [SIGINT, SIGTERM, SIGHUP]
        var previous: [sigaction] = []
        for signal in forwarded {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { received in PendingSignal.value.store(received, ordering: .relaxed) }
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            var old = sigaction()
            sigaction(signal, &action, &old)
            previous.append(old)
        }
        defer {
            for (index, signal) in forwarded.enumerated() {
                var old = previous[index]
                sigaction(signal, &old, nil)
            }
        }
        guard let pid = spawn(argv, stdin: 0, stdout: 1, stderr: 2) else { return nil }
        // The child's end is seen at once through its pidfd; a signal caught on any thread
        // is looked for at least every 100 ms.
        let pidfd = agent_pidfd_open(pid)
        defer { if pidfd >= 0 { close(pidfd) } }
        while true {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return status }
            if reaped < 0, errno != EINTR { return nil }
            let signal = PendingSignal.value.exchange(0, ordering: .relaxed)
            if signal != 0 { kill(pid, signal) }
            if pidfd >= 0 {
                var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 100)
            } else {
                usleep(20_000)
            }
        }
    }

    /// `posix_spawnp` with the three descriptors and default signal handling; nil on failure.
    static func spawn(_ argv: [String], stdin: Int32, stdout: Int32, stderr: Int32) -> pid_t? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, target) in [(stdin, Int32(0)), (stdout, Int32(1)), (stderr, Int32(2))] where fd != target {
            posix_spawn_file_actions_adddup2(&actions, fd, target)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var pid: pid_t = 0
        let result = withCStrings(argv) { pointers in
            posix_spawnp(&pid, argv[0], &actions, &attributes, pointers, environ)
        }
        guard result == 0 else {
            errno = result
            return nil
        }
        return pid
    }

    static func waitForExit(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return nil }
        }
        return status
    }
}

/// The last forwarded signal caught while a child runs (0: none); a lock-free atomic, so
/// the handler may store to it.
enum PendingSignal {
    static let value = Atomic<Int32>(0)
}
