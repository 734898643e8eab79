import AgentCore
import CAgentSpawn
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs the programs tests drive (git, sh, X clients, Python) without Foundation's
/// `Process`, for two reasons found the hard way:
/// - Foundation learns that a child exited from SIGCHLD, and the agent's process reactor,
///   running in the same test process, takes SIGCHLD through its signalfd: a
///   `waitUntilExit` could then wait forever on a zombie. Here each child is reaped by its
///   own pid with `waitpid`.
/// - Test threads (dispatch's) block almost every signal, and a spawned child inherits
///   the mask: `timeout 20 xev` never ended, since xev ignored the SIGTERM it was sent.
///   Here each child starts with an empty mask and default dispositions.
public enum ChildProgram {
    /// How a program ended and what it wrote to stdout.
    public struct Outcome: Sendable {
        /// The exit code, or 128 + the signal that ended it; -1 if it could not start.
        public let status: Int32
        public let stdout: String
    }

    /// How long a child may run before ``run(_:environment:directory:input:stderrToStdout:timeout:)``
    /// and ``Running/wait()`` end it: a test's time limit only cancels its task, which a
    /// thread waiting on a child never sees, so a client the code under test leaves waiting
    /// (an ssh session whose close was lost) would hold the whole run.
    public static let defaultTimeout: Duration = .seconds(300)

    /// Runs `arguments` (the first looked up on PATH) to completion on a thread of its own.
    /// - Parameters:
    ///   - environment: added to (or replacing) this process's variables.
    ///   - directory: working directory (default: this process's).
    ///   - input: written to stdin, which is then closed (stdin is always a pipe).
    ///   - stderrToStdout: stderr joins stdout instead of going to /dev/null.
    ///   - timeout: past it the child gets SIGKILL (status 137), and stdout ends with a line
    ///     that says so; what the child's own children still write is not waited for.
    public static func run(
        _ arguments: [String], environment: [String: String] = [:], directory: String? = nil, input: String? = nil,
        stderrToStdout: Bool = false, timeout: Duration = defaultTimeout
    ) async -> Outcome {
        await onThread {
            let deadline = ContinuousClock.now + timeout
            guard let child = start(arguments, environment: environment, directory: directory, stderrToStdout: stderrToStdout) else {
                return Outcome(status: -1, stdout: "")
            }
            // Input is written on a thread of its own, so that a child that writes before it
            // has read everything cannot deadlock against us.
            if let input {
                let fd = child.stdin
                Thread {
                    writeAll(fd, input)
                    close(fd)
                }.start()
            } else {
                close(child.stdin)
            }
            var output: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            var ranOut = false
            while true {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else {
                    ranOut = true
                    break
                }
                var ready = pollfd(fd: child.stdout, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, Int32(min(left, .seconds(1)) / .milliseconds(1)) + 1)
                if polled == 0 || (polled < 0 && errno == EINTR) { continue }
                if polled < 0 { break }
                let n = chunk.withUnsafeMutableBytes { read(child.stdout, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                output += chunk[0..<n]
            }
            close(child.stdout)
            // A child whose output a process it left behind holds open may have ended: a
            // moment's grace to say which.
            let ended = reap(child.pid, until: ranOut ? .now + .seconds(2) : deadline)
            var text = String(decoding: output, as: UTF8.self)
            if ended.timedOut {
                text += "\n[ChildProgram: \(arguments[0]) ran past its \(timeout) and was killed]\n"
            } else if ranOut {
                text += "\n[ChildProgram: \(arguments[0]) ended, but its output was still open after \(timeout)]\n"
            }
            return Outcome(status: ended.status, stdout: text)
        }
    }

    /// Waits for child `pid` (by pid, so that no other reaper takes it) until `deadline`, then
    /// ends it with SIGKILL and reaps it; its exit code, or 128 + the signal that ended it
    /// (-1 if it was not ours to wait for), and whether the deadline did.
    public static func reap(_ pid: pid_t, until deadline: ContinuousClock.Instant) -> (status: Int32, timedOut: Bool) {
        var status: Int32 = 0
        var pause: UInt32 = 1_000
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return (code(status), false) }
            if reaped < 0 && errno != EINTR { return (-1, false) }
            guard ContinuousClock.now < deadline else { break }
            usleep(pause)
            pause = min(pause * 2, 20_000)
        }
        _ = Glibc.kill(pid, SIGKILL)
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return (-1, true) }
        }
        return (code(status), true)
    }

    /// A wait status as a shell reports it: the exit code, or 128 + the signal.
    private static func code(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// A started child: its pid and our ends of its stdin and stdout pipes.
    public struct Running: Sendable {
        public let pid: pid_t
        public let stdin: Int32
        public let stdout: Int32
        /// Set by the first ``kill()``: a second one must not signal a pid or close
        /// descriptors that may belong to someone else by then.
        private let killed = KillOnce()

        init(pid: pid_t, stdin: Int32, stdout: Int32) {
            self.pid = pid
            self.stdin = stdin
            self.stdout = stdout
        }

        /// Waits for the child (by pid, so no other reaper can take it) and returns
        /// its exit code, or 128 + its signal; after ``ChildProgram/defaultTimeout`` it is
        /// ended with SIGKILL (137).
        public func wait() -> Int32 {
            ChildProgram.reap(pid, until: .now + ChildProgram.defaultTimeout).status
        }

        /// Asks the child to end with SIGTERM, so that it can remove what it made (Xvfb its
        /// socket and lock file), and gives it `grace` before SIGKILL; reaps it and closes its
        /// pipes; once, like ``kill()``. Blocks: call it off the cooperative pool.
        public func terminate(grace: Duration = .seconds(10)) {
            guard killed.first() else { return }
            _ = Glibc.kill(pid, SIGTERM)
            _ = ChildProgram.reap(pid, until: .now + grace)
            closePipes()
        }

        /// Reads one line (without its newline) of at most `limit` bytes from the child's
        /// stdout, waiting at most `timeout` for each byte; what came when it ends or stalls.
        public func readLine(limit: Int = 256, timeout: Duration = .seconds(60)) -> String {
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            let milliseconds = Int32(timeout.components.seconds * 1000)
            while bytes.count < limit {
                var ready = pollfd(fd: stdout, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, milliseconds) == 1, read(stdout, &byte, 1) == 1, byte != 10 else { break }
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// Ends the child with SIGKILL, reaps it and closes its pipes; once (later calls do
        /// nothing).
        public func kill() {
            guard killed.first() else { return }
            killAndClose()
        }

        private func killAndClose() {
            _ = Glibc.kill(pid, SIGKILL)
            _ = wait()
            closePipes()
        }

        private func closePipes() {
            close(stdin)
            close(stdout)
        }
    }

    /// Starts `arguments` with stdin and stdout on pipes; nil if it could not start.
    public static func start(
        _ arguments: [String], environment: [String: String] = [:], directory: String? = nil, stderrToStdout: Bool = false
    ) -> Running? {
        signal(SIGPIPE, SIG_IGN)  // a child that exits before reading its input
        // Close-on-exec from creation (pipe2), so that no other test's child inherits an
        // end and holds our EOF; then both ends back to blocking.
        var input: [Int32] = [0, 0]
        var output: [Int32] = [0, 0]
        guard agent_output_pipe(&input, 0) == 0 else { return nil }
        guard agent_output_pipe(&output, 0) == 0 else {
            close(input[0]); close(input[1])
            return nil
        }
        for fd in input + output { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        if stderrToStdout {
            posix_spawn_file_actions_adddup2(&actions, output[1], 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        // Nothing else of ours reaches the child: this process may hold thousands of
        // sockets without close-on-exec (the hostile-client tests), which would fill a
        // child's descriptor table.
        agent_spawn_actions_close_from(&actions, 3)
        if let directory { agent_spawn_actions_chdir(&actions, directory) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var variables = ProcessInfo.processInfo.environment
        for (key, value) in environment { variables[key] = value }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        close(input[0])
        close(output[1])
        guard rc == 0 else {
            close(input[1])
            close(output[0])
            return nil
        }
        return Running(pid: pid, stdin: input[1], stdout: output[0])
    }
}

/// A flag that reports `true` once.
final class KillOnce: Sendable {
    private let done = Atomic<Bool>(false)
    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
}
