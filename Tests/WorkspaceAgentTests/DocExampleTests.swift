import AgentTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs every example of README.md and docs/ against the real binary, so that none can go
/// stale (the convention: ``DocExamples``, and docs/architecture.md).
///
/// Each markdown file with examples gets its own agent: the built `workspace-agent` on a free
/// loopback port, with a fresh `$HOME`, state directory and agent socket. The examples are
/// written for a user's agent on its defaults, so before running, `127.0.0.1:2114` in them
/// becomes the test agent's address; in what they print, the agent's address becomes
/// `127.0.0.1:2114` again and the test's `$HOME` becomes `/root` (the README's set-up is
/// Debian as root). They run with bash under `env -i` (PATH: the built binaries, then the
/// system's), so nothing of the test process leaks into them.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct DocExampleTests {
    static let files = DocExamples.markdownFiles

    @Test func theConventionIsKept() throws {
        var problems: [String] = []
        var examples = 0
        for file in Self.files {
            let parsed = try Self.load(file)
            problems += parsed.problems
            examples += parsed.examples.count
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        // The README's tour alone has more; a parser that finds none is broken.
        #expect(examples >= 10, "only \(examples) examples found in \(Self.files)")
    }

    @Test func setupCommandsNameRealTargets() async throws {
        let targets = DocExamples.makeTargets()
        #expect(targets.isSuperset(of: ["run", "test", "install", "install-check", "image"]), "Makefile targets: \(targets.sorted())")
        for file in Self.files {
            for block in try Self.load(file).setups {
                let syntax = await ChildProgram.run(["/bin/bash", "-n"], input: block.code, stderrToStdout: true)
                #expect(syntax.status == 0, "\(file):\(block.line): bash -n: \(syntax.stdout)")
                let words = block.code.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" || $0 == "&" }).map(String.init)
                for (index, word) in words.enumerated() where word == "make" && index + 1 < words.count {
                    let target = words[index + 1]
                    if target.contains("=") || target.hasPrefix("-") { continue }
                    #expect(targets.contains(target), "\(file):\(block.line): `make \(target)` names no target of the Makefile")
                }
            }
        }
    }

    @Test(arguments: files)
    func examplesRunAsWritten(_ file: String) async throws {
        let parsed = try Self.load(file)
        guard !parsed.examples.isEmpty else { return }

        let root = NSTemporaryDirectory() + "doc-examples-\(UUID().uuidString.prefix(8))"
        let home = root + "/home"
        let outputs = root + "/out"
        for directory in [home, outputs] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        defer { try? FileManager.default.removeItem(atPath: root) }
        let socket = root + "/agent.sock"

        let agent = try AgentDaemon.launch(
            [
                "--http-address", "127.0.0.1:0", "--state-dir", root + "/state", "--socket-path", socket, "--log-level", "info",
                "--ssh-address", "127.0.0.1:0",
            ],
            environment: ["HOME": home, "TMPDIR": root])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let address = "127.0.0.1:\(port)"
        // Examples reach the SSH listener as `-p 2222` (`-P 2222` for scp and sftp).
        let sshPort = await agent.sshPort()

        let script = parsed.script(outputDirectory: outputs) { code in
            code.replacingOccurrences(of: "127.0.0.1:2114", with: address)
                .replacingOccurrences(of: "-p 2222", with: "-p \(sshPort)").replacingOccurrences(of: "-P 2222", with: "-P \(sshPort)")
        }
        let binaries = URL(fileURLWithPath: AgentDaemon.binaryPath).deletingLastPathComponent().path
        let outcome = await ChildProgram.run(
            [
                "/usr/bin/env", "-i", "HOME=\(home)", "USER=root", "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=\(root)",
                "PATH=\(binaries):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "CODER_AGENT_SOCKET_PATH=\(socket)", "/usr/bin/timeout", "240", "/bin/bash", "-s",
            ],
            input: script, stderrToStdout: true)

        func output(_ number: Int) -> String {
            let text = (try? String(contentsOfFile: "\(outputs)/\(number).out", encoding: .utf8)) ?? ""
            return text.replacingOccurrences(of: address, with: "127.0.0.1:2114").replacingOccurrences(of: home, with: "/root")
        }
        let reached = (try? String(contentsOfFile: outputs + "/current", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        if outcome.status != 0 {
            let failed = Int(reached) ?? 0
            let block = parsed.examples[min(failed, parsed.examples.count - 1)]
            Issue.record(
                """
                \(file):\(block.line): the example failed (exit status \(outcome.status)):
                \(block.code)
                --- its output:
                \(output(failed))
                --- bash:
                \(outcome.stdout)
                --- agent log (tail):
                \(agent.log.suffix(3000))
                """)
            return
        }
        #expect(reached == "done")
        for (number, block) in parsed.examples.enumerated() {
            let actual = output(number)
            if ProcessInfo.processInfo.environment["DOC_EXAMPLES_PRINT"] != nil {
                print("=== \(file):\(block.line)\n\(actual)=== end")
            }
            guard let expected = block.expected else { continue }
            #expect(
                DocExamples.matches(expected: expected, actual: actual),
                """
                \(file):\(block.line): the example's output differs.
                \(block.code)
                --- expected (normalized):
                \(DocExamples.normalize(expected))
                --- actual (normalized):
                \(DocExamples.normalize(actual))
                """)
        }
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus(timeout: .seconds(15)) == 0, "the agent did not stop cleanly; log:\n\(agent.log.suffix(3000))")
    }

    /// Every relative link of the markdown files reaches a file, and its `#anchor` a heading
    /// there (GitHub's slugs), so moving a section cannot leave a dangling reference.
    @Test func relativeLinksResolve() throws {
        var broken: [String] = []
        let link = try NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        for file in Self.files {
            let text = try String(contentsOf: DocExamples.repositoryRoot.appendingPathComponent(file), encoding: .utf8)
            let prose = DocExamples.withoutCodeBlocks(text)
            for match in link.matches(in: prose, range: NSRange(prose.startIndex..., in: prose)) {
                let target = String(prose[Range(match.range(at: 1), in: prose)!])
                if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let base = URL(fileURLWithPath: file, relativeTo: DocExamples.repositoryRoot).deletingLastPathComponent()
                let resolved = parts[0].isEmpty ? DocExamples.repositoryRoot.appendingPathComponent(file) : base.appendingPathComponent(parts[0]).standardizedFileURL
                guard FileManager.default.fileExists(atPath: resolved.path) else {
                    broken.append("\(file): \(target): no such file")
                    continue
                }
                if parts.count == 2, resolved.pathExtension == "md" {
                    let headings = DocExamples.headingSlugs(try String(contentsOf: resolved, encoding: .utf8))
                    if !headings.contains(parts[1]) { broken.append("\(file): \(target): no such heading") }
                }
            }
        }
        #expect(broken.isEmpty, "\(broken.joined(separator: "\n"))")
    }

    @Test func theMatcherHandlesWildcardsAndNormalization() {
        #expect(DocExamples.matches(expected: "a\n...\nz", actual: "a\nb\nc\nz\n"))
        #expect(DocExamples.matches(expected: "a\n...\nz", actual: "a\nz"))
        #expect(!DocExamples.matches(expected: "a\nz", actual: "a\nb\nz"))
        #expect(DocExamples.matches(expected: "id <...> ok", actual: "id 12 34 ok  "))
        #expect(
            DocExamples.matches(
                expected: #"{"id":"11111111-2222-3333-4444-555555555555"}"#, actual: #"{"id":"0b3a9c1e-8f1e-4c7a-9d2f-1a2b3c4d5e6f"}"#))
        #expect(!DocExamples.matches(expected: "x", actual: "y"))
        let parsed = DocExamples(file: "t.md", text: "```sh\necho hi\n```\n\n```output\nhi\n```\n```bash\nx\n```\n```output\nstray\n```\n")
        #expect(parsed.examples.count == 1 && parsed.examples[0].expected == "hi")
        #expect(parsed.problems.count == 2)
    }

    static func load(_ file: String) throws -> DocExamples {
        let text = try String(contentsOf: DocExamples.repositoryRoot.appendingPathComponent(file), encoding: .utf8)
        return DocExamples(file: file, text: text)
    }
}
