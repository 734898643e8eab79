import AgentTestSupport
import CAgentSpawn
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hostile and buggy clients against the real binary.
/// A generous time limit, only against hangs.
@Suite(.timeLimit(.minutes(10))) struct WorkspaceAgentHardeningTests {
    // MARK: Defect 4: start-up failures

    @Test func aSecondAgentOnABusyPortExitsWithOneClearLine() async throws {
        let first = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { first.cleanup() }
        let port = try await first.port()
        let second = try AgentDaemon.launch(["--http-address", "127.0.0.1:\(port)"])
        defer { second.cleanup() }
        #expect(await second.exitStatus(timeout: .seconds(30)) == 1)
        let lines = second.log.split(separator: "\n").filter { $0.contains("cannot listen") }
        #expect(lines.count == 1)
        #expect(lines.first?.contains("127.0.0.1:\(port)") == true)
        #expect(lines.first?.contains("address already in use (errno 98)") == true)
        // The first agent is unaffected.
        #expect(try await RawHTTPClient(port: port).request("GET", "/healthz").status == 200)
    }

    // MARK: Defect 5: signals

    @Test func signalsThatUsedToKillTheAgentAreIgnored() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--log-level", "debug"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        for sig in [SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE] {
            agent.signal(sig)
            #expect(try await client.request("GET", "/healthz").status == 200, "signal \(sig) ended the agent")
        }
        #expect(agent.reap() == nil)
        // Logged by the signal task, apart from the loop that answered /healthz.
        #expect(await eventually { agent.log.contains("ignored signal") })
    }

    @Test func sighupShutsDownGracefullyAndEndsChildren() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        let started = try await client.request("POST", "/api/v0/processes/start", json: #"{"command":"sleep 1000"}"#)
        let id = try #require(jsonObject(started.body)?["id"] as? String)
        _ = id
        let shell = try await shellPID(of: agent, command: "sleep 1000")
        agent.signal(SIGHUP)
        #expect(await agent.exitStatus(timeout: .seconds(30)) == 0)
        #expect(kill(-shell, 0) != 0, "the process group survived SIGHUP")
    }

    // MARK: Defect 1: process group ids the agent no longer owns

    @Test func aReusedProcessGroupIdIsNeverSignalled() async throws {
        guard getuid() == 0, access("/proc/sys/kernel/ns_last_pid", W_OK) == 0 else {
            print("skipped: forcing pid reuse needs root and a writable /proc/sys/kernel/ns_last_pid")
            return
        }
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        var victim: pid_t = 0
        for _ in 0..<5 where victim == 0 {
            let started = try await client.request("POST", "/api/v0/processes/start", json: #"{"command":"echo $$"}"#)
            let id = try #require(jsonObject(started.body)?["id"] as? String)
            let output = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
            let text = try #require(jsonObject(output.body)?["output"] as? String)
            let old = try #require(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
            // The agent releases the group once it is empty (the zombie leader is reaped).
            _ = await eventually(timeout: .seconds(10)) { access("/proc/\(old)", F_OK) != 0 }
            // Hand that pid to an unrelated process that leads its own group.
            let candidate = try spawnGroupLeader(reusing: old)
            if candidate == old { victim = candidate } else { kill(candidate, SIGKILL); reap(candidate) }
        }
        guard victim != 0 else {
            print("skipped: could not make the kernel reuse the pid (busy machine)")
            return
        }
        defer {
            kill(victim, SIGKILL)
            reap(victim)
        }
        print("pid \(victim) reused by an unrelated process group leader")
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus(timeout: .seconds(30)) == 0)
        var status: Int32 = 0
        #expect(waitpid(victim, &status, WNOHANG) == 0, "the agent killed an unrelated process group")
    }

    // MARK: Defect 3: shutdown with hostile clients

    @Test func sigtermEndsTheAgentWhateverClientsDo() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let client = RawHTTPClient(port: port)
        // A process whose setsid grandchild holds the output pipe, and one that writes a lot.
        let held = try await client.request(
            "POST", "/api/v0/processes/start", json: #"{"command":"setsid sleep 1000 & echo started; sleep 1000"}"#)
        let chatty = try await client.request(
            "POST", "/api/v0/processes/start", json: #"{"command":"head -c 100000000 /dev/zero; sleep 1000"}"#)
        let chattyID = try #require(jsonObject(chatty.body)?["id"] as? String)
        _ = try #require(jsonObject(held.body)?["id"] as? String)
        // A half-sent request head, a silent connection, and a stream subscriber that never reads.
        let partial = try #require(await LoopbackSocket.connect(port: port))
        partial.send("POST /api/v0/processes/start HTTP/1.1\r\nHost: x\r\nContent-Le")
        let silent = try #require(await LoopbackSocket.connect(port: port))
        let stalled = try #require(await LoopbackSocket.connect(port: port))
        stalled.setReceiveBuffer(4096)
        stalled.send(
            String.webSocketHandshake("/api/v0/processes/\(chattyID)/stream"))
        // Until the setsid grandchild runs (sh → setsid → exec sleep: slow on a loaded host).
        var grandchildren: [ProcessInstance] = []
        _ = await eventually(timeout: .seconds(30)) {
            grandchildren = processes(named: "sleep", sessionLeaderOnly: true).filter { isDescendant($0, of: agent.pid) }
                .compactMap(ProcessInstance.init)
            return !grandchildren.isEmpty
        }
        #expect(!grandchildren.isEmpty, "the setsid grandchild did not start")
        agent.signal(SIGTERM)
        // Exit 0: the graceful path finished; exit 1: the watchdog ended the agent at the 7 s
        // bound (a debug build with both cores busy was seen to need longer to stop the
        // 100 MB writer). Either way it ended, and took its process groups with it (below).
        let status = await agent.exitStatus(timeout: .seconds(30))
        #expect(status == 0 || (status == 1 && agent.log.contains("killing owned process groups and exiting")), "exit \(String(describing: status))")
        for grandchild in grandchildren {
            // Killed before the agent exited; reaped by whoever inherits it (a zombie a
            // moment longer on a loaded machine). Its pid may be another's by then.
            let gone = await eventually(timeout: .seconds(5)) { grandchild.hasEnded }
            #expect(gone, "setsid grandchild \(grandchild) survived the agent")
        }
        _ = (partial, silent)
    }

    // MARK: Defect 6: memory of stalled subscribers

    @Test func stalledSubscribersStayWithinTheirMemoryBound() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let client = RawHTTPClient(port: port)
        var ids: [String] = []
        for _ in 0..<4 {
            let started = try await client.request(
                "POST", "/api/v0/processes/start", json: #"{"command":"sleep 1; head -c 200000000 /dev/zero; sleep 600"}"#)
            ids.append(try #require(jsonObject(started.body)?["id"] as? String))
        }
        try await Task.sleep(for: .milliseconds(300))
        // Anonymous memory (what queued output is): the start-up page release and file pages
        // faulted back in would move VmRSS by up to 20 MiB either way.
        let before = rssAnon(agent.pid)
        var sockets: [LoopbackSocket] = []
        for id in ids {
            for _ in 0..<16 {
                let socket = try #require(await LoopbackSocket.connect(port: port))
                socket.setReceiveBuffer(4096)
                socket.send(
                    String.webSocketHandshake("/api/v0/processes/\(id)/stream"))
                sockets.append(socket)
            }
        }
        // The writers run while 64 subscribers never read (bounded: 8 s of samples).
        var peak = before
        for _ in 0..<160 {
            peak = max(peak, rssAnon(agent.pid))
            try await Task.sleep(for: .milliseconds(50))
        }
        sockets.removeAll()
        // Until the agent has let the subscribers go (at most 30 s).
        var after = rssAnon(agent.pid)
        _ = await eventually(timeout: .seconds(30)) {
            after = rssAnon(agent.pid)
            return after - before <= 8 << 20
        }
        let perSubscriber = Double(peak - before) / 64
        print("stalled subscribers: \(before >> 10) KiB at start, peak +\(Int(perSubscriber) >> 10) KiB per subscriber, +\((after - before) >> 10) KiB after they left")
        #expect(perSubscriber <= 1.5 * 1048576, "over the stated bound per subscriber")
        // The release benchmark checks the 5 MiB goal; a debug build keeps a little more.
        #expect(after - before <= 8 << 20, "memory was not returned after the subscribers left")
    }

    // MARK: Helpers

    /// The shell pid of a process (its group id) from `/proc`, by command line.
    func shellPID(of agent: AgentDaemon, command: String) async throws -> pid_t {
        var found: pid_t?
        _ = await eventually(timeout: .seconds(10)) {
            // This agent's child: an earlier run that crashed may have left the same command.
            found = processes(commandLine: ["sh", "-c", command]).first { isDescendant($0, of: agent.pid) }
            return found != nil
        }
        return try #require(found)
    }

    /// Spawns `sleep 1000` in its own process group, after asking the kernel to hand out
    /// `pid` next.
    func spawnGroupLeader(reusing pid: pid_t) throws -> pid_t {
        try "\(pid - 1)".write(toFile: "/proc/sys/kernel/ns_last_pid", atomically: false, encoding: .utf8)
        let argv = ["/bin/sleep", "1000"]
        let pointers = argv.map { strdup($0) } + [nil]
        defer { for p in pointers { free(p) } }
        var step: Int32 = 0
        var err: Int32 = 0
        let child = pointers.withUnsafeBufferPointer { argvPtr in
            "/bin/sleep".withCString { path in
                var options = agent_spawn_options(
                    path: path, argv: argvPtr.baseAddress, envp: argvPtr.baseAddress! + 2, cwd: nil, output_fd: 2,
                    oom_score_adj: AGENT_SPAWN_KEEP, nice_value: AGENT_SPAWN_KEEP, nofile_soft: -1, parent_death_signal: 0, error_fd: -1, new_session: 0, input_fd: -1, controlling_terminal: 0)
                return agent_spawn(&options, &step, &err)
            }
        }
        try #require(child > 0)
        return child
    }

    func reap(_ pid: pid_t) {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

/// Pids whose `/proc/<pid>/cmdline` is exactly `commandLine`.
func processes(commandLine: [String]) -> [pid_t] {
    let wanted = commandLine.joined(separator: "\0") + "\0"
    return allPids().filter { pid in
        (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) == wanted
    }
}

/// Pids of processes named `name`; with `sessionLeaderOnly`, those that lead their session.
func processes(named name: String, sessionLeaderOnly: Bool) -> [pid_t] {
    allPids().filter { pid in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return false }
        guard stat[stat.index(after: open)..<close] == name else { return false }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return !sessionLeaderOnly || (fields.count > 3 && pid_t(fields[3]) == pid)
    }
}

/// True when `pid`'s chain of parents (at most 8 up) reaches `ancestor`.
func isDescendant(_ pid: pid_t, of ancestor: pid_t) -> Bool {
    var current = pid
    for _ in 0..<8 {
        guard let stat = try? String(contentsOfFile: "/proc/\(current)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, let parent = pid_t(fields[1]) else { return false }
        if parent == ancestor { return true }
        if parent <= 1 { return false }
        current = parent
    }
    return false
}

func allPids() -> [pid_t] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid_t($0) }
}
