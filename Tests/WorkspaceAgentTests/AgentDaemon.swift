import AgentCore
import AgentTestSupport
import CAgentSpawn
import Foundation
import Synchronization
import Testing

/// The real `workspace-agent` binary, started as a child with a clean signal mask (via the
/// project's spawn shim: Foundation.Process from async code would hand it a blocked mask).
struct AgentDaemon {
    let pid: pid_t
    let logPath: String
    /// The temporary directories and sockets ``launch(_:environment:executable:)`` chose for
    /// the daemon (state, agent socket, script data, logs, boundary socket): ``cleanup()``
    /// removes them.
    var scratch: [String] = []

    /// The binary built next to this test bundle.
    static var binaryPath: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        if dir.lastPathComponent.hasSuffix(".xctest") { dir = dir.deletingLastPathComponent() }
        return dir.appendingPathComponent("workspace-agent").path
    }

    /// Runs the binary with exactly `arguments` (no agent flags added) to its end; stdout
    /// and stderr together, and the exit status (128 + the signal that ended it; after
    /// ``ChildProgram/defaultTimeout`` it gets SIGKILL, and the output says so).
    /// `outputPath`: where the output goes while the command runs, for a test to watch (the
    /// caller removes it); by default a file of its own, removed at the end.
    /// `directory`: the command's working directory (the test's when nil).
    static func command(_ arguments: [String], outputPath: String? = nil, directory: String? = nil) async -> (output: String, status: Int32) {
        await onThread {
            let logPath = outputPath ?? NSTemporaryDirectory() + "sync-cli-\(UUID().uuidString).out"
            let fd = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            defer { if outputPath == nil { unlink(logPath) } }
            let argv = [AgentDaemon.binaryPath] + arguments
            let env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CODER_") }.map { "\($0.key)=\($0.value)" }
            var step: Int32 = 0
            var err: Int32 = 0
            let pid = withCStrings(argv) { argvPtr in
                withCStrings(env) { envPtr in
                    AgentDaemon.binaryPath.withCString { path in
                        withOptionalCString(directory) { cwd in
                            var options = agent_spawn_options(
                                path: path, argv: argvPtr, envp: envPtr, cwd: cwd, output_fd: fd,
                                oom_score_adj: AGENT_SPAWN_KEEP, nice_value: AGENT_SPAWN_KEEP, nofile_soft: -1, parent_death_signal: 0, error_fd: -1, new_session: 0, input_fd: -1, controlling_terminal: 0)
                            return agent_spawn(&options, &step, &err)
                        }
                    }
                }
            }
            close(fd)
            guard pid > 0 else { return ("spawn failed: step \(step) errno \(err)", -1) }
            // Bounded here: a test's time limit only cancels its task, which this thread
            // never sees.
            let ended = ChildProgram.reap(pid, until: .now + ChildProgram.defaultTimeout)
            var output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if ended.timedOut { output += "\n[the command ran past \(ChildProgram.defaultTimeout) and was killed]\n" }
            return (output, ended.status)
        }
    }

    /// Starts the agent with `arguments` and extra environment; output goes to a log file.
    /// `executable`: the path run and its argv[0] (a `coder` link to the binary).
    static func launch(_ arguments: [String], environment extra: [String: String] = [:], executable: String = binaryPath) throws -> AgentDaemon {
        let logPath = NSTemporaryDirectory() + "agent-daemon-\(UUID().uuidString).log"
        let fd = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        var env = ProcessInfo.processInfo.environment
        for key in env.keys where key.hasPrefix("CODER_") { env[key] = nil }
        var scratch: [String] = []
        /// A temporary path for the daemon, removed again by ``cleanup()``.
        func temporary(_ name: String) -> String {
            scratch.append(NSTemporaryDirectory() + name)
            return scratch[scratch.count - 1]
        }
        env["XDG_STATE_HOME"] = temporary("agent-state-\(UUID().uuidString)")
        for (k, v) in extra { env[k] = v }
        // Concurrent daemons would all want the default Prometheus port and socket path.
        var argv = [executable] + arguments + (arguments.contains("--prometheus-address") ? [] : ["--prometheus-address", ""])
        // And the default debug listener's port.
        if !arguments.contains("--debug-address") && extra["CODER_AGENT_DEBUG_ADDRESS"] == nil { argv += ["--debug-address", ""] }
        // Each daemon its own boundary socket too (concurrent tests).
        if !arguments.contains("--boundary-log-proxy-socket-path") && extra["CODER_AGENT_BOUNDARY_LOG_PROXY_SOCKET_PATH"] == nil {
            argv += ["--boundary-log-proxy-socket-path", temporary("boundary-\(UUID().uuidString.prefix(8)).sock")]
        }
        if !arguments.contains("--socket-path") && extra["CODER_AGENT_SOCKET_PATH"] == nil {
            argv += ["--socket-path", temporary("agent-sock-\(UUID().uuidString.prefix(8))") + "/agent.sock"]
        }
        // Scripts' data and log files in the daemon's own directories.
        if !arguments.contains("--script-data-dir") && extra["CODER_AGENT_SCRIPT_DATA_DIR"] == nil {
            argv += ["--script-data-dir", temporary("agent-script-data-\(UUID().uuidString.prefix(8))")]
        }
        if !arguments.contains("--log-dir") && extra["CODER_AGENT_LOG_DIR"] == nil {
            argv += ["--log-dir", temporary("agent-logs-\(UUID().uuidString.prefix(8))")]
        }
        let envp = env.map { "\($0.key)=\($0.value)" }
        let binaryPath = executable
        let argvStrings = argv
        // Spawned from the lifelong thread with SIGTERM as the parent-death signal: a test
        // run that hangs or is killed takes its daemons (and their children) with it.
        let (pid, step, err) = LifelongThread.run { () -> (pid_t, Int32, Int32) in
            var step: Int32 = 0
            var err: Int32 = 0
            let pid = withCStrings(argvStrings) { argvPtr in
                withCStrings(envp) { envpPtr in
                    binaryPath.withCString { path in
                        var options = agent_spawn_options(
                            path: path, argv: argvPtr, envp: envpPtr, cwd: nil, output_fd: fd,
                            oom_score_adj: AGENT_SPAWN_KEEP, nice_value: AGENT_SPAWN_KEEP, nofile_soft: -1, parent_death_signal: SIGTERM,
                            error_fd: -1, new_session: 0, input_fd: -1, controlling_terminal: 0)
                        return agent_spawn(&options, &step, &err)
                    }
                }
            }
            return (pid, step, err)
        }
        try #require(pid > 0, "spawn failed: step \(step) errno \(err)")
        // Pids are reused (the suite starts thousands of processes): a status remembered
        // for an earlier daemon with this pid is not this one's.
        statuses.withLock { $0[pid] = nil }
        return AgentDaemon(pid: pid, logPath: logPath, scratch: scratch)
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The listening port, read from the agent's log (bounded wait).
    func port(timeout: Duration = .seconds(30)) async throws -> Int {
        var found: Int?
        _ = await eventually(timeout: timeout) {
            if let range = log.range(of: #"(?<![_a-z])address[=":]+127\.0\.0\.1:(\d+)"#, options: .regularExpression) {
                found = Int(log[range].split(separator: ":").last!.filter(\.isNumber))
            }
            return found != nil || reap() != nil
        }
        return try #require(found, "agent did not report its address; log:\n\(log)")
    }

    /// The `--ssh-address` listener's port, read from the agent's log ("" when none within
    /// `timeout`).
    func sshPort(timeout: Duration = .seconds(30)) async -> String {
        var port = ""
        _ = await eventually(timeout: timeout) {
            port =
                log.split(separator: "\n").first { $0.contains("ssh listening") }
                .flatMap { $0.split(separator: ":").last.map { String($0.prefix { $0.isNumber }) } } ?? ""
            return !port.isEmpty
        }
        return port
    }

    func signal(_ sig: Int32) { kill(pid, sig) }

    /// The exit code once exited; nil while running. With `wait`, polls up to `timeout`,
    /// sleeping between polls: a test waiting for an agent to stop must not hold one of the
    /// cooperative pool's threads (two cores: two threads), or every other test stalls. The
    /// default bound is generous: on a loaded 2-core host the debug binary took over 30 s to
    /// refuse an unknown flag. Tests of a stated shutdown bound pass their own.
    @discardableResult
    func exitStatus(wait: Bool = true, timeout: Duration = .seconds(120)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = reap() { return status }
            if !wait || ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The exit code if the agent has exited (reaped once, remembered), without waiting.
    func reap() -> Int32? {
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            Self.statuses.withLock { $0[pid] = status }
        }
        guard let status = Self.statuses.withLock({ $0[pid] }) else { return nil }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Reaped statuses, so a second query still sees the first one.
    static let statuses = Mutex<[pid_t: Int32]>([:])

    /// Kills the agent if a test left it running.
    /// Ends the agent and whatever it started that still runs (a killed agent cannot stop
    /// its children, and they would outlive the test): the agent is stopped first, so that
    /// it reaps nothing and the pids found below it stay its descendants until killed. Then
    /// its log and the temporary paths ``launch(_:environment:executable:)`` chose go.
    func cleanup() {
        if reap() == nil {
            kill(pid, SIGSTOP)
            for descendant in allPids() where isDescendant(descendant, of: pid) { kill(descendant, SIGKILL) }
            kill(pid, SIGKILL)
            // A killed process is reaped at once (bounded: 3 s of 1 ms polls).
            for _ in 0..<3000 where reap() == nil { usleep(1000) }
        }
        unlink(logPath)
        for path in scratch { try? FileManager.default.removeItem(atPath: path) }
    }
}

/// Resident set size of `pid`, in bytes (VmRSS from /proc).
func rss(_ pid: pid_t) -> Int { statusBytes(pid, "VmRSS:") }

/// The anonymous part of `pid`'s resident set, in bytes (RssAnon): what buffering grows,
/// without the file pages the agent's start-up release drops and later use faults back in.
func rssAnon(_ pid: pid_t) -> Int { statusBytes(pid, "RssAnon:") }

/// A `kB` field of `/proc/PID/status`, in bytes (0 if absent).
private func statusBytes(_ pid: pid_t, _ field: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix(field) } ?? ""
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
}

/// `body` with `text` as a C string, or with nil when there is none.
private func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
