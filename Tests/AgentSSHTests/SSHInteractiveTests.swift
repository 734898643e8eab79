import AgentCore
import AgentTestSupport
@testable import AgentSSH
import Foundation
import Testing

/// An interactive login shell through OpenSSH's client in a real terminal: tmux (on a
/// private socket, so the test never meets anyone else's tmux) runs `ssh -tt` in a pane,
/// types into it and reads the pane back, as a person at a terminal would.
@Suite(.timeLimit(.minutes(3)), .enabled(if: ExecutableLookup.find("tmux", path: ProcessInfo.processInfo.environment["PATH"]) != nil))
struct SSHInteractiveTests {
    /// A tmux server of the test's own, on a socket in a directory of its own.
    struct Tmux {
        let directory: String
        var socket: String { directory + "/sock" }

        init() throws {
            directory = try #require(String(validatingCString: mkdtemp(strdup("/tmp/tmux-ssh-XXXXXX"))))
        }

        /// `tmux -S <socket> <arguments>`; stdio away from the test's pipes, since the first
        /// call leaves the server running.
        @discardableResult
        func run(_ arguments: [String]) async -> ChildProgram.Outcome {
            await ChildProgram.run(["tmux", "-S", socket, "-f", "/dev/null"] + arguments)
        }

        /// The pane's visible text, one string per line.
        func pane() async -> [String] {
            await run(["capture-pane", "-p", "-t", "main"]).stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }

        /// Ends the server this test started (by its socket) and removes the directory.
        func stop() async {
            _ = await ChildProgram.run(["sh", "-c", "tmux -S \(socket) kill-server </dev/null >/dev/null 2>&1"])
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Types `keys` then Enter into the pane.
    func type(_ tmux: Tmux, _ keys: String) async {
        let sent = await tmux.run(["send-keys", "-t", "main", keys, "Enter"])
        #expect(sent.status == 0)
    }

    @Test func anInteractiveShellInATerminalDrivenByTmux() async throws {
        let server = try await SSHSessionTests.Server()
        let tmux = try Tmux()
        await drive(server: server, tmux: tmux)
        await tmux.stop()
        await server.stop()
    }

    private func drive(server: SSHSessionTests.Server, tmux: Tmux) async {
        let ssh =
            "ssh -tt -F /dev/null -p \(server.port) -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes "
            + "-o LogLevel=ERROR -o ConnectTimeout=60 127.0.0.1"
        let started = await ChildProgram.run([
            "sh", "-c", "tmux -S \(tmux.socket) -f /dev/null new-session -d -s main -x 120 -y 40 '\(ssh)' </dev/null >/dev/null 2>&1",
        ])
        #expect(started.status == 0)

        // The login shell's prompt (`$` or `#` at the end of the last line written).
        let prompted = await eventually(timeout: .seconds(60)) {
            let last = await tmux.pane().last { !$0.trimmingCharacters(in: .whitespaces).isEmpty } ?? ""
            let trimmed = last.trimmingCharacters(in: .whitespaces)
            return trimmed.hasSuffix("$") || trimmed.hasSuffix("#")
        }
        var screen = await tmux.pane()
        #expect(prompted, "\(screen)")
        guard prompted else { return }
        #expect(server.server.sessions.count == 1)

        await type(tmux, "echo $((6*7))")
        let answered = await eventually(timeout: .seconds(60)) { await tmux.pane().contains { $0.trimmingCharacters(in: .whitespaces) == "42" } }
        screen = await tmux.pane()
        #expect(answered, "\(screen)")

        // A resized window reaches the shell (tmux's SIGWINCH, ssh's window-change, the
        // agent's resize): asked again until the shell sees it, a bounded number of times.
        #expect(await tmux.run(["resize-window", "-t", "main", "-x", "100", "-y", "30"]).status == 0)
        var resized = false
        for _ in 0..<12 where !resized {
            await type(tmux, "stty size")
            resized = await eventually(timeout: .seconds(5)) { await tmux.pane().contains { $0.trimmingCharacters(in: .whitespaces) == "30 100" } }
        }
        screen = await tmux.pane()
        #expect(resized, "\(screen)")

        // `exit` ends the shell, the session and the ssh client; the pane and its tmux
        // session go with it.
        await type(tmux, "exit")
        #expect(await eventually(timeout: .seconds(60)) { server.server.sessions.count == 0 })
        #expect(await eventually(timeout: .seconds(60)) { await tmux.run(["has-session", "-t", "main"]).status != 0 })
    }
}
