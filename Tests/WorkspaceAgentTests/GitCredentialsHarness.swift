import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the git credential tests share: a scratch directory with a repository to serve, git
/// run under `env -i` (no user or system configuration, no terminal prompts), and lines read
/// from a server child's stdout.
struct GitWorkspace: Sendable {
    let directory: String
    var home: String { directory + "/home" }
    var tmp: String { directory + "/tmp" }
    /// The bare repository (`<directory>/srv/repo.git`) with one commit of `hello.txt`.
    var repository: String { directory + "/srv/repo.git" }
    static let content = "hello from the served repository\n"

    init() async throws {
        directory = NSTemporaryDirectory() + "git-credentials-\(UUID().uuidString.prefix(8))"
        for path in [directory + "/src", directory + "/srv", directory + "/home", directory + "/tmp"] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        try TestFile.write(directory + "/src/hello.txt", Self.content)
        for arguments in [
            ["init", "-q", "-b", "main"], ["add", "hello.txt"],
            ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first"],
        ] {
            let outcome = await git(arguments, in: directory + "/src")
            try #require(outcome.status == 0, "git \(arguments): \(outcome.stdout)")
        }
        let bare = await git(["clone", "-q", "--bare", directory + "/src", repository], in: directory)
        try #require(bare.status == 0, "\(bare.stdout)")
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// `git <arguments>` in `directory` with only `environment` beside PATH, HOME and TMPDIR;
    /// stdout and stderr together.
    func git(_ arguments: [String], in directory: String? = nil, environment: [String: String] = [:]) async -> ChildProgram.Outcome {
        var variables = [
            "PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": tmp, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            "LANG": "C",
        ]
        for (key, value) in environment { variables[key] = value }
        let words = variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return await ChildProgram.run(["/usr/bin/env", "-i"] + words + ["git"] + arguments, directory: directory ?? self.directory, stderrToStdout: true)
    }

    /// The file cloned into `destination`, or nil.
    func clonedContent(_ destination: String) -> String? {
        try? String(contentsOfFile: directory + "/" + destination + "/hello.txt", encoding: .utf8)
    }

    /// The private key files `gitssh` left in TMPDIR.
    func leftoverKeys() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).filter { $0.hasPrefix("coder-gitsshkey-") }
    }
}

/// A child server that prints lines (its port first): the lines read so far, on a thread of
/// its own so that a test can wait for one.
final class ServerChild: Sendable {
    let child: ChildProgram.Running
    private let lines = LinesSeen()

    init(_ arguments: [String], stderrToStdout: Bool = false) throws {
        child = try #require(ChildProgram.start(arguments, stderrToStdout: stderrToStdout), "cannot start \(arguments)")
        let fd = child.stdout
        let lines = self.lines
        Thread {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                pending += chunk[0..<n]
                while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: pending[..<end], as: UTF8.self))
                    pending.removeSubrange(...end)
                }
            }
            lines.close()
        }.start()
    }

    /// The first line that satisfies `match`, waiting up to `timeout`.
    func line(within timeout: Duration = .seconds(60), where match: (String) -> Bool = { _ in true }) async -> String? {
        var deadline = PollDeadline(timeout)
        while !deadline.hasPassed {
            if let found = lines.all.first(where: match) { return found }
            if lines.closed { return nil }
            await deadline.sleep(.milliseconds(20))
        }
        return nil
    }

    var all: [String] { lines.all }

    func stop() { child.kill() }
}

private final class LinesSeen: Sendable {
    private let state = Mutex<(lines: [String], closed: Bool)>(([], false))
    func append(_ line: String) { state.withLock { $0.lines.append(line) } }
    func close() { state.withLock { $0.closed = true } }
    var all: [String] { state.withLock { $0.lines } }
    var closed: Bool { state.withLock { $0.closed } }
}
