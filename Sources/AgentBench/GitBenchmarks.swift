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
    @Option(help: "Seconds the agent is left idle while its CPU time is read.") var idleSeconds = 30

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
        _ = binary
    }

    /// `git` on PATH.
    static func gitPath() throws -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let candidate = "\(directory)/git"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw ValidationError("git not found on PATH")
    }

    /// Runs git in `root` with stdout into `output`; fails on a non-zero exit.
    @discardableResult
    static func runGit(_ git: String, _ root: String, _ arguments: [String], output: String = "/dev/null") throws -> Int32 {
        let pid = Bench.spawn(
            [git, "-C", root, "-c", "user.name=Bench", "-c", "user.email=bench@example.invalid", "-c", "core.autocrlf=false"] + arguments,
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
