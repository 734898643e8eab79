import ArgumentParser
import Foundation
import GitWatch

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench git`: on a generated repository (20 000 files, 50 dirty, 20 untracked), a full
/// scan through libgit2 against `git status --porcelain`, `git diff HEAD` and one
/// `git diff --no-index` per untracked file in the same run; a no-change check against the
/// same; and, through a running agent, how soon a shell write reaches a watch socket's
/// `changes` and the agent's CPU per idle minute while it watches.
struct GitBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "git", abstract: "Git watching: scans, no-change checks, write → changes.")

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?

    @Option(help: "Tracked files in the generated repository.") var files = 20_000
    @Option(help: "Rounds per side.") var rounds = 7
    @Option(help: "Writes whose delivery is timed.") var writes = 10
    @Option(help: "Seconds the agent is left idle while its CPU time is read.") var idleSeconds = 60

    func run() throws {
        let binary = try Bench.agentBinary(agent)
        let git = try Self.gitPath()
        let directory = NSTemporaryDirectory() + "agent-bench-git-\(getpid())"
        let root = directory + "/repo"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        print("agent-bench git: \(files) files, 50 dirty, 20 untracked; \(rounds) rounds per side (medians)")
        try Self.generate(root: root, files: files, git: git)

        // Full scan: libgit2 in process against the git CLI.
        var ours: [Double] = []
        var theirs: [Double] = []
        var diffBytes = 0
        for _ in 0..<rounds {
            let start = Bench.now()
            let snapshot = try GitSnapshotter.snapshot(root: root)
            ours.append(Double(Bench.now() - start))
            diffBytes = snapshot.unifiedDiff.utf8.count
            theirs.append(Double(try Self.cliScan(root: root, git: git, scratch: directory)))
        }
        let full = Bench.median(ours)
        let cli = Bench.median(theirs)
        report(
            "full scan (\(diffBytes / 1024) KiB diff)", value: Bench.format(full), baseline: Bench.format(cli), ratio: full / cli,
            goal: "<= 1.0x git CLI", met: full / cli <= 1.0)

        // No change, polling: the stat fingerprint (used when inotify cannot cover the tree).
        var prints: [Double] = []
        for _ in 0..<rounds {
            let start = Bench.now()
            _ = try RepositoryFingerprint.compute(root: root)
            prints.append(Double(Bench.now() - start))
        }
        let fingerprint = Bench.median(prints)
        report(
            "no-change check, polling fingerprint", value: Bench.format(fingerprint), baseline: Bench.format(cli), ratio: fingerprint / cli,
            goal: "reported (inotify off)", met: true)

        try throughAgent(binary: binary, root: root, fullScan: full, cliScan: cli)
    }

    /// A tool call records the repository for a chat; a watch socket then sees shell writes.
    func throughAgent(binary: String, root: String, fullScan: Double, cliScan: Double) throws {
        let benchmarks = ProcessBenchmarks()
        let port = Bench.freePort()
        let daemon = benchmarks.launch(binary, port: port)
        defer { benchmarks.stop(daemon) }
        guard benchmarks.connectWhenHealthy(port: port) != nil else { throw ValidationError("agent did not answer /healthz") }
        let chat = "4b3a2c1d-0e9f-4a8b-9c7d-6e5f4a3b2c1d"
        // Rewriting a file with its own contents records the path and changes nothing.
        let recorded = root + "/src/d1/f101.txt"
        let contents = try Data(contentsOf: URL(fileURLWithPath: recorded))
        guard Self.writeFile(port: port, path: recorded, chat: chat, body: Array(contents)) == 200 else {
            throw ValidationError("write-file failed")
        }
        guard let socket = BenchWebSocket(port: port, path: "/api/v0/git/watch?chat_id=\(chat)") else {
            throw ValidationError("the watch socket was refused")
        }
        guard let first = socket.next(timeoutMs: 30_000), first.contains("repositories") else {
            throw ValidationError("no first changes message")
        }

        // Each write waits out the 1 s cooldown first, so what is timed is the event path.
        var latencies: [Double] = []
        let target = root + "/src/d5/f500.txt"
        for index in 0..<writes {
            usleep(1_200_000)
            let marker = "bench-marker-\(index)"
            let start = Bench.now()
            guard let handle = FileHandle(forWritingAtPath: target) else { throw ValidationError("cannot open \(target)") }
            handle.seekToEndOfFile()
            handle.write(Data((marker + "\n").utf8))
            handle.closeFile()
            var seen = false
            for _ in 0..<50 {
                guard let message = socket.next(timeoutMs: 5000) else { break }
                if message.contains(marker) {
                    seen = true
                    break
                }
            }
            guard seen else { throw ValidationError("write \(index) never reached the socket") }
            latencies.append(Double(Bench.now() - start))
            if ProcessInfo.processInfo.environment["BENCH_VERBOSE"] != nil { print("  write \(index): \(Bench.format(latencies.last!))") }
        }
        let median = Bench.median(latencies)
        let worst = latencies.max() ?? 0
        report(
            "write -> changes (median of \(writes))", value: Bench.format(median), baseline: Bench.format(fullScan),
            ratio: median / fullScan, goal: "< 1.5 s (baseline: one full scan)", met: worst < 1.5e9)
        report(
            "write -> changes (worst)", value: Bench.format(worst), baseline: Bench.format(fullScan),
            ratio: worst / fullScan, goal: "< 1.5 s", met: worst < 1.5e9)

        // Idle: the socket stays open (heartbeats read, pings answered) and nothing changes.
        let before = Bench.cpuSeconds(daemon)
        let idleStart = Bench.now()
        let idleEnd = idleStart + UInt64(idleSeconds) * 1_000_000_000
        var heartbeats = 0
        while Bench.now() < idleEnd {
            let left = Int32((idleEnd - Bench.now()) / 1_000_000) + 1
            if socket.next(timeoutMs: left) != nil { heartbeats += 1 }
        }
        let cpu = Double((Bench.cpuSeconds(daemon) - before) * 1e9)
        let minutes = Double(Bench.now() - idleStart) / 60e9
        let perMinute = cpu / minutes
        // The reference scans with the git CLI on every 5 s tick: 12 scans a minute.
        let reference = cliScan * 12
        report(
            "agent CPU per idle minute (\(heartbeats) heartbeats)", value: Bench.format(perMinute), baseline: Bench.format(reference),
            ratio: perMinute / reference, goal: "< 100 ms (baseline: 12 CLI scans)", met: perMinute < 100e6)
        let perTick = perMinute / 12
        report(
            "no-change check, inotify (per tick)", value: Bench.format(perTick), baseline: Bench.format(cliScan),
            ratio: perTick / cliScan, goal: "<= 0.1x git CLI", met: perTick / cliScan <= 0.1)
    }

    /// POST /api/v0/write-file for `chat`; the HTTP status, or 0.
    static func writeFile(port: Int, path: String, chat: String, body: [UInt8]) -> Int {
        guard let fd = Bench.connect(port: port) else { return 0 }
        defer { close(fd) }
        let head =
            "POST /api/v0/write-file?path=\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nCoder-Chat-Id: \(chat)\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        guard Bench.sendAll(fd, Array(head.utf8) + body) else { return 0 }
        var answer = [UInt8](repeating: 0, count: 512)
        let n = recv(fd, &answer, answer.count, 0)
        guard n > 12 else { return 0 }
        return Int(String(decoding: answer[9..<12], as: UTF8.self)) ?? 0
    }

    /// `git` on PATH.
    static func gitPath() throws -> String {
        guard let git = Bench.onPath("git") else { throw ValidationError("git not found on PATH") }
        return git
    }

    /// Runs git in `root` with stdout into `output` (no background gc: its repacking would
    /// be a change the watcher rightly reports in the middle of the measurements).
    @discardableResult
    static func runGit(_ git: String, _ root: String, _ arguments: [String], output: String = "/dev/null") throws -> Int32 {
        let pid = Bench.spawn(
            [git, "-C", root, "-c", "user.name=Bench", "-c", "user.email=bench@example.invalid", "-c", "core.autocrlf=false", "-c", "gc.auto=0"] + arguments,
            stdoutPath: output)
        let status = Bench.wait(pid)
        return status
    }

    /// 20 000 files of 40 lines in 200 directories, committed; then 50 edited and 20 new.
    static func generate(root: String, files: Int, git: String) throws {
        guard try runGit(git, root, ["init", "-q", "-b", "main"]) == 0 else { throw ValidationError("git init failed") }
        let perDirectory = 100
        for index in 0..<files {
            let directory = root + "/src/d\(index / perDirectory)"
            if index % perDirectory == 0 { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            var text = ""
            for line in 0..<40 { text += "file \(index) line \(line): the quick brown fox jumps over the lazy dog\n" }
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/f\(index).txt"))
        }
        try Data("*.log\nbuild/\n".utf8).write(to: URL(fileURLWithPath: root + "/.gitignore"))
        guard try runGit(git, root, ["add", "-A"]) == 0, try runGit(git, root, ["commit", "-q", "-m", "generated"]) == 0 else {
            throw ValidationError("git commit failed")
        }
        let stride = max(1, files / 50)
        for n in 0..<50 {
            let index = n * stride
            let path = root + "/src/d\(index / perDirectory)/f\(index).txt"
            var text = try String(contentsOfFile: path, encoding: .utf8)
            text = text.replacingOccurrences(of: "line 20:", with: "LINE 20 (edited):")
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        }
        for n in 0..<20 {
            try Data("new file \(n)\n".utf8).write(to: URL(fileURLWithPath: root + "/src/d\(n)/new\(n).txt"))
        }
        // Settle git's own stat cache, as a watched repository's would be.
        try runGit(git, root, ["status", "--porcelain"])
    }

    /// What the reference runs per scan: status, the tracked diff, one no-index diff per
    /// untracked file. Returns nanoseconds.
    static func cliScan(root: String, git: String, scratch: String) throws -> UInt64 {
        let status = scratch + "/status.out"
        let start = Bench.now()
        try runGit(git, root, ["status", "--porcelain", "--untracked-files=all"], output: status)
        try runGit(git, root, ["diff", "HEAD"], output: scratch + "/diff.out")
        let untracked = try String(contentsOfFile: status, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("?? ") }
        for line in untracked {
            try runGit(git, root, ["diff", "--no-index", "--", "/dev/null", String(line.dropFirst(3))], output: scratch + "/new.out")
        }
        return Bench.now() - start
    }
}
