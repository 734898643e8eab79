import ControlPlaneDouble
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `git clone` over HTTP with the agent as `GIT_ASKPASS` (two askpass runs, each asking the
/// control-plane double) against the same clone with the credentials in the URL, from
/// `git http-backend` on loopback; a repository of `files` files.
extension TemplatesBenchmarks {
    static func gitClone(binary: String, runs: Int, files: Int = 1000) async throws {
        guard let python = Bench.onPath("python3"), let git = Bench.onPath("git") else {
            print("  git clone: skipped (python3 or git missing)")
            return
        }
        let root = NSTemporaryDirectory() + "agent-bench-git-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: root) }
        for directory in ["src", "srv", "home"] {
            try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
        }
        let environment = ["PATH": "/usr/bin:/bin", "HOME": root + "/home", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LANG": "C"]
        for index in 0..<files {
            try "file \(index)\n".write(toFile: root + "/src/file\(index).txt", atomically: false, encoding: .utf8)
        }
        @Sendable func runGit(_ arguments: [String], in directory: String, _ extra: [String: String] = [:]) -> Bool {
            Bench.wait(Bench.spawn([git, "-C", directory] + arguments, stdoutPath: "/dev/null", environment: environment.merging(extra) { $1 })) == 0
        }
        guard runGit(["init", "-q", "-b", "main"], in: root + "/src"), runGit(["add", "."], in: root + "/src"),
            runGit(["-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-qm", "files"], in: root + "/src"),
            runGit(["clone", "-q", "--bare", root + "/src", root + "/srv/repo.git"], in: root)
        else {
            print("  git clone: skipped (could not make the repository)")
            return
        }
        let token = "bench-token-0123456789"
        let file = "\(#filePath)"
        let repository = String(file[..<file.range(of: "/Sources/AgentBench/")!.lowerBound])
        let script = repository + "/Tests/WorkspaceAgentTests/Servers/git_http_backend.py"
        let (server, input, output) = ProcessBenchmarks.spawnPiped([python, script, root + "/srv", token, token])
        defer {
            close(input)
            kill(server, SIGKILL)
            _ = Bench.wait(server)
            close(output)
        }
        guard let port = Self.firstLine(output) else {
            print("  git clone: skipped (the git server did not start)")
            return
        }
        // The server reports each request on stdout: drain it so that it never blocks.
        Thread {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while read(output, &chunk, chunk.count) > 0 {}
        }.start()
        let double = ControlPlaneDouble()
        try await double.run { base in
            double.externalAuth.withLock { $0.providers = [DoubleExternalAuthProvider(id: "github", regex: "^http://127\\.0\\.0\\.1:")] }
            double.linkExternalAuth("github", token: token)
            let askpass = ["GIT_ASKPASS": binary, "CODER_AGENT_URL": base, "CODER_AGENT_TOKEN": double.token]
            var number = 0
            func clone(_ url: String, _ extra: [String: String]) -> Double {
                number += 1
                let destination = root + "/clone-\(number)"
                defer { try? FileManager.default.removeItem(atPath: destination) }
                let start = Bench.now()
                let ok = runGit(["clone", "-q", url, destination], in: root, extra)
                let elapsed = Double(Bench.now() - start)
                return ok ? elapsed : .infinity
            }
            let (withAskpass, withURL) = Self.pair(
                runs: runs,
                {
                    clone("http://127.0.0.1:\(port)/repo.git", askpass)
                },
                {
                    clone("http://\(token):\(token)@127.0.0.1:\(port)/repo.git", [:])
                })
            report(
                "git clone, \(files) files, askpass", value: Bench.format(withAskpass), baseline: Bench.format(withURL) + " URL credentials",
                ratio: withAskpass / withURL, goal: "<= 1.2x", met: withAskpass <= 1.2 * withURL)
        }
    }

    /// The first line the child writes on `fd` (its port), or nil at EOF.
    static func firstLine(_ fd: Int32) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }
}
