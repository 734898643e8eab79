import AgentCore
import AgentTestSupport
@testable import AgentSSH
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSH
import Testing

/// The SSH server driven by OpenSSH's own client (`ssh`) over loopback: commands and their
/// exit codes and signals, stdout and stderr apart, stdin to EOF, a 2 MiB round trip byte
/// for byte, 32 MiB copies with scp, sftp and rsync, the
/// environment, terminals, and a client that goes before its command ends.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHSessionTests {
    /// An in-process server on an ephemeral loopback port.
    final class Server: Sendable {
        let server: SSHServer
        let listener: LoopbackListener
        var port: Int { listener.port }

        init(
            manifest: AgentManifest? = nil, environment: [String: String] = ProcessInfo.processInfo.environment, policy: SSHPolicy = SSHPolicy(),
            banners: AnnouncementBanners = AnnouncementBanners(), timeoutRule: SSHTimeoutRule = .silence(.seconds(72 * 3600)),
            upward: any UpwardSink = DiscardingUpward(), limits: SSHConnectionLimits = SSHConnectionLimits(),
            source: SSHConnectionSource = .loopback, command: CommandEnvironment = CommandEnvironment()
        ) async throws {
            let store = ManifestStore()
            if let manifest { store.publish(manifest) }
            let server = SSHServer(
                manifest: store, environment: environment, policy: policy, upward: upward, banners: banners, timeoutRule: timeoutRule, limits: limits,
                command: command, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            self.server = server
            listener = try await LoopbackListener { channel in server.serve(channel, from: source) }
        }

        func stop() async {
            server.closeAll()
            await listener.close()
        }

        /// `ssh` with options for a throwaway host key and no configuration of the user's.
        func ssh(_ command: String, options: [String] = [], input: String? = nil) async -> ChildProgram.Outcome {
            await ChildProgram.run(
                [
                    "ssh", "-F", "/dev/null", "-p", "\(port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=60",
                ] + options + ["127.0.0.1", command],
                input: input, stderrToStdout: false)
        }
    }

    @Test func exitCodesStdoutAndStdinToEOF() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let plain = await server.ssh("echo hello; echo to-stderr >&2; exit 3")
        #expect(plain.status == 3 && plain.stdout == "hello\n", "\(plain)")
        let piped = await server.ssh("cat; echo done", input: "line one\nline two\n")
        #expect(piped.status == 0 && piped.stdout == "line one\nline two\ndone\n", "\(piped)")
        // A #! command runs under its interpreter.
        let script = await server.ssh("#!/usr/bin/python3\nimport sys\nprint('from python', sys.version_info[0])")
        #expect(script.stdout == "from python 3\n", "\(script)")
    }

    @Test func stderrStaysApartFromStdout() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let errorFile = NSTemporaryDirectory() + "ssh-stderr-\(UUID().uuidString)"
        defer { unlink(errorFile) }
        let outcome = await ChildProgram.run(
            ["sh", "-c", "ssh -F /dev/null -p \(server.port) -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR 127.0.0.1 'echo out; echo err >&2' 2>\(errorFile)"])
        #expect(outcome.stdout == "out\n")
        #expect((try? String(contentsOfFile: errorFile, encoding: .utf8)) == "err\n")
    }

    @Test func aProcessKilledByASignalEndsWithExitSignal() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        // OpenSSH reports an exit-signal as status 255 and, verbosely, the request's name.
        let outcome = await ChildProgram.run(
            [
                "ssh", "-v", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "127.0.0.1", "kill -TERM $$",
            ],
            stderrToStdout: true)
        #expect(outcome.status == 255)
        #expect(outcome.stdout.contains("rtype exit-signal"), "\(outcome.stdout.suffix(800))")
    }

    @Test func twoMiBRoundTripByteForByte() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let directory = NSTemporaryDirectory() + "ssh-bulk-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = SplitMix64(seed: 7)
        let bytes = (0..<(2 << 20)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        try TestFile.write(directory + "/in", bytes)
        let outcome = await ChildProgram.run([
            "sh", "-c",
            "ssh -F /dev/null -p \(server.port) -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR 127.0.0.1 cat < \(directory)/in > \(directory)/out; echo $?",
        ])
        #expect(outcome.stdout == "0\n")
        let back = try Data(contentsOf: URL(fileURLWithPath: directory + "/out"))
        #expect(back.count == bytes.count && back == Data(bytes))
    }

    /// A command that ends while its client still reads slowly: every byte arrives before
    /// the exit status and the close (with a terminal, and without).
    @Test(arguments: [false, true])
    func aSlowReaderGetsAllTheOutputOfAnEndedCommand(terminal: Bool) async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let ssh =
            "ssh -F /dev/null -p \(server.port) -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
            + (terminal ? " -tt" : "")
        // 4 000 000 characters on one line; the reader starts once the command has long ended.
        let outcome = await ChildProgram.run(
            ["sh", "-c", "\(ssh) 127.0.0.1 'head -c 3000000 /dev/zero | base64 -w0' < /dev/null | (sleep 3; wc -c)"],
            stderrToStdout: true)
        #expect(outcome.stdout.hasPrefix("4000000\n"), "\(outcome)")
    }

    @Test func theEnvironmentFollowsTheReferencesOrder() async throws {
        let manifest = AgentManifest(
            directory: "/", environment: ["CODER": "true", "CODER_WORKSPACE_NAME": "ws", "FROM_MANIFEST": "m"],
            workspaceName: "ws", agentName: "main", ownerName: "alice")
        let server = try await Server(manifest: manifest, environment: ["PATH": "/usr/bin:/bin", "AGENT_ONLY": "agent", "HOME": "/root"])
        defer { Task { await server.stop() } }
        let outcome = await server.ssh(
            "echo $CLIENT_VAR $AGENT_ONLY $CODER $CODER_WORKSPACE_NAME $FROM_MANIFEST [$CODER_SSH_SESSION_TYPE] $SSH_CONNECTION; pwd",
            options: ["-o", "SetEnv=CLIENT_VAR=client AGENT_ONLY=overridden CODER_WORKSPACE_NAME=mine CODER_SSH_SESSION_TYPE=vscode"])
        #expect(outcome.stdout == "client agent true ws m [] 0.0.0.0 0 0.0.0.0 0\n/\n", "\(outcome)")
    }

    /// A session keeps at most 64 KiB of the client's variables in all (each up to 32 KiB):
    /// a third 30 KiB variable is refused, the first two are set.
    @Test func theClientsVariablesAreBoundedTogether() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let big = String(repeating: "v", count: 30 << 10)
        let outcome = await server.ssh(
            "echo ${#A} ${#B} ${#C}", options: ["-o", "SetEnv=A=\(big) B=\(big) C=\(big)"])
        #expect(outcome.stdout == "\(30 << 10) \(30 << 10) 0\n", "\(outcome.stdout.prefix(200))")
    }

    @Test func aTerminalSessionHasItsTTYAndSize() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let outcome = await server.ssh("tty; echo TERM=$TERM; echo SSH_TTY=$SSH_TTY; stty size; exit 4", options: ["-tt"])
        #expect(outcome.status == 4, "\(outcome)")
        let lines = outcome.stdout.split(whereSeparator: \.isNewline).map(String.init)
        let tty = lines.first ?? ""
        #expect(tty.hasPrefix("/dev/pts/"), "\(outcome)")
        #expect(lines.contains("SSH_TTY=\(tty)"), "\(outcome)")
    }

    /// A login shell in a terminal shows the manifest's MOTD first (CR LF lines); a command
    /// does not, nor does a shell when `~/.hushlogin` exists.
    @Test func theMessageOfTheDayGreetsALoginShell() async throws {
        let home = NSTemporaryDirectory() + "ssh-motd-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        try TestFile.write(home + "/motd", "Welcome to the workspace\nsecond line\n", atomically: true)
        var manifest = AgentManifest(directory: home, environment: [:])
        manifest.motdFile = home + "/motd"
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        let server = try await Server(manifest: manifest, environment: environment)
        defer { Task { await server.stop() } }
        let shell = await server.ssh("", options: ["-tt"], input: "exit 0\n")
        #expect(shell.stdout.hasPrefix("Welcome to the workspace\r\nsecond line\r\n"), "\(shell.stdout.debugDescription)")
        let command = await server.ssh("echo plain", options: ["-tt"])
        #expect(!command.stdout.contains("Welcome"), "\(command.stdout.debugDescription)")
        try TestFile.write(home + "/.hushlogin", [UInt8]())
        let quiet = await server.ssh("", options: ["-tt"], input: "exit 0\n")
        #expect(!quiet.stdout.contains("Welcome"), "\(quiet.stdout.debugDescription)")
    }

    /// Enabled announcement banners come first (trimmed, a blank line after each), then the
    /// MOTD; a disabled or empty banner shows nothing, and a command shows neither.
    @Test func announcementBannersGreetALoginShellBeforeTheMOTD() async throws {
        let home = NSTemporaryDirectory() + "ssh-banner-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        try TestFile.write(home + "/motd", "Welcome to the workspace\n", atomically: true)
        var manifest = AgentManifest(directory: home, environment: [:])
        manifest.motdFile = home + "/motd"
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        let banners = AnnouncementBanners()
        banners.store([
            AnnouncementBanner(enabled: true, message: "  Maintenance at 5 pm\nsave your work \n"),
            AnnouncementBanner(enabled: false, message: "a disabled banner"),
            AnnouncementBanner(enabled: true, message: " \n "),
            AnnouncementBanner(enabled: true, message: "Second banner"),
        ])
        let server = try await Server(manifest: manifest, environment: environment, banners: banners)
        defer { Task { await server.stop() } }
        let shell = await server.ssh("", options: ["-tt"], input: "exit 0\n")
        #expect(
            shell.stdout.hasPrefix("Maintenance at 5 pm\r\nsave your work\r\n\r\nSecond banner\r\n\r\nWelcome to the workspace\r\n"),
            "\(shell.stdout.debugDescription)")
        #expect(!shell.stdout.contains("disabled"), "\(shell.stdout.debugDescription)")
        let command = await server.ssh("echo plain", options: ["-tt"])
        #expect(!command.stdout.contains("Maintenance"), "\(command.stdout.debugDescription)")
    }

    @Test func theGreetingsTextIsCRLFLines() {
        #expect(LoginGreeting.text(banners: [], motd: nil) == "")
        #expect(LoginGreeting.text(banners: [AnnouncementBanner(enabled: true, message: "a\r\nb")], motd: "m1\nm2") == "a\r\nb\r\n\r\nm1\r\nm2\r\n")
        #expect(LoginGreeting.text(banners: [AnnouncementBanner(enabled: false, message: "x")], motd: "\n") == "\r\n")
    }

    @Test func aClientThatGoesHangsUpItsSession() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let marker = NSTemporaryDirectory() + "ssh-hup-\(UUID().uuidString)"
        defer { unlink(marker) }
        // The command records its pid and waits; the client is killed; SIGHUP must end it.
        let client = try #require(
            ChildProgram.start(
                [
                    "ssh", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "127.0.0.1", "echo $$ > \(marker); echo ready; exec sleep 600",
                ]))
        defer { client.kill() }
        let ready = await onThread { client.readLine(timeout: .seconds(60)) }
        #expect(ready == "ready")
        let pid = try #require(Int32(try String(contentsOfFile: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(kill(pid, 0) == 0)
        await onThread { client.kill() }
        let gone = await eventually(timeout: .seconds(60)) { kill(pid, 0) != 0 }
        #expect(gone, "the session's process outlived its client")
    }

    @Test func runningSessionsAreCountedByType() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let counts = server.server.counts
        func start(_ options: [String]) throws -> ChildProgram.Running {
            try #require(
                ChildProgram.start(
                    [
                        "ssh", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                    ] + options + ["127.0.0.1", "read line"]))
        }
        let plain = try start([])
        let vscode = try start(["-o", "SetEnv=CODER_SSH_SESSION_TYPE=VSCode"])
        #expect(await eventually(timeout: .seconds(60)) { counts.count(.ssh) == 1 && counts.count(.vscode) == 1 })
        // A line ends each `read`, and so each session.
        for child in [plain, vscode] {
            _ = write(child.stdin, "x\n", 2)
            #expect(await onThread { child.wait() } == 0)
        }
        #expect(await eventually(timeout: .seconds(60)) { counts.count(.ssh) == 0 && counts.count(.vscode) == 0 })
    }

    /// Fifty sessions at once on one connection (OpenSSH's connection sharing: one key
    /// exchange, fifty session channels), each with its own process and answer.
    @Test func fiftyConcurrentSessions() async throws {
        let server = try await Server()
        defer { Task { await server.stop() } }
        let control = NSTemporaryDirectory() + "ssh-mux-\(UUID().uuidString.prefix(8))"
        defer { unlink(control) }
        let shared = ["-o", "ControlPath=\(control)"]
        let master = try #require(
            ChildProgram.start(
                [
                    "ssh", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ControlMaster=yes", "-o", "ControlPath=\(control)", "-N", "127.0.0.1",
                ]))
        defer { Task { await onThread { master.kill() } } }
        #expect(await eventually(timeout: .seconds(60)) { access(control, F_OK) == 0 })
        let outcomes = await withTaskGroup(of: ChildProgram.Outcome.self) { group in
            for index in 0..<50 { group.addTask { await server.ssh("echo session $((\(index) * 2))", options: shared) } }
            var all: [ChildProgram.Outcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.filter { $0.status == 0 }.count == 50, "\(outcomes.filter { $0.status != 0 })")
        #expect(Set(outcomes.map(\.stdout)) == Set((0..<50).map { "session \($0 * 2)\n" }))
        #expect(await eventually(timeout: .seconds(30)) { server.server.sessions.count == 0 })
    }

    @Test func theHostKeyIsStableForAWorkspacesNames() {
        #expect(SSHHostKey.seed(owner: "admin", workspace: "dev", agent: "main") == -261_101_927_900_401_156)
        #expect(SSHHostKey.seed(owner: "alice", workspace: "myws", agent: "main") == -7_252_753_921_750_590_186)
        let one = SSHHostKey.key(seed: 1).publicKey
        #expect(one == SSHHostKey.key(seed: 1).publicKey)
        #expect(one != SSHHostKey.key(seed: 2).publicKey)
    }

    @Test func commandsAndShellWords() {
        #expect(SessionCommand(shell: "/bin/bash", command: nil).argv == ["/bin/bash", "-l"])
        #expect(SessionCommand(shell: "/bin/bash", command: "").argv == ["/bin/bash", "-l"])
        #expect(SessionCommand(shell: "/bin/bash", command: "ls -l").argv == ["/bin/bash", "-c", "ls -l"])
        #expect(
            SessionCommand(shell: "/bin/sh", command: "#!/usr/bin/env python3 -u\nprint(1)").argv
                == ["/usr/bin/env", "python3", "-u", "-c", "#!/usr/bin/env python3 -u\nprint(1)"])
        #expect(SessionCommand.shellWords(#"a 'b c' "d \"e\"" f\ g"#) == ["a", "b c", #"d "e""#, "f g"])
    }
}

/// File transfer and port forwarding with OpenSSH's own tools: `scp`, `sftp` and `rsync`
/// byte for byte, `ssh -L` to a service in the workspace and `ssh -R` back to the client.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHTransferAndForwardingTests {
    static let options = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"

    /// 32 MiB (four windows): the 100 MiB copies are in `agent-bench ssh`; here, in a debug
    /// build beside the rest of the suite on a loaded 2-core host, they ran past 3 minutes.
    @Test func scpSftpAndRsyncCopy32MiBByteForByte() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let directory = NSTemporaryDirectory() + "ssh-files-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = server.port
        // Up with scp, down with sftp and rsync; `cmp` names the first differing byte.
        let script = """
            set -e
            cd \(directory)
            head -c \(32 << 20) /dev/urandom > source
            scp -P \(port) \(Self.options) source 127.0.0.1:\(directory)/by-scp
            echo "get \(directory)/by-scp by-sftp" | sftp -P \(port) \(Self.options) 127.0.0.1 >/dev/null
            rsync -e "ssh -F /dev/null -p \(port) \(Self.options)" 127.0.0.1:\(directory)/by-sftp by-rsync
            for name in by-scp by-sftp by-rsync; do cmp source $name; done
            wc -c < by-rsync
            echo copied
            """
        let outcome = await ChildProgram.run(["sh", "-c", script], stderrToStdout: true)
        #expect(outcome.stdout.hasSuffix("\(32 << 20)\ncopied\n"), "\(outcome)")
    }

    @Test func localAndRemoteForwards() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        // A service in the "workspace" (this host) answering one line, reached through -L.
        let script = """
            import socket, subprocess, sys, threading
            def serve(s, reply):
                while True:
                    c, _ = s.accept()
                    c.recv(100)
                    c.sendall(reply)
                    c.close()
            def listener(reply):
                s = socket.socket()
                s.bind(('127.0.0.1', 0))
                s.listen()
                threading.Thread(target=serve, args=(s, reply), daemon=True).start()
                return s.getsockname()[1]
            service = listener(b'from the workspace\\n')
            client_side = listener(b'from the client\\n')
            local = socket.socket(); local.bind(('127.0.0.1', 0)); free_l = local.getsockname()[1]; local.close()
            remote = socket.socket(); remote.bind(('127.0.0.1', 0)); free_r = remote.getsockname()[1]; remote.close()
            ssh = ['ssh', '-F', '/dev/null', '-p', sys.argv[1], '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
                   '-o', 'BatchMode=yes', '-o', 'LogLevel=ERROR', '-o', 'ExitOnForwardFailure=yes',
                   '-L', '127.0.0.1:%d:127.0.0.1:%d' % (free_l, service), '-R', '127.0.0.1:%d:127.0.0.1:%d' % (free_r, client_side),
                   '127.0.0.1',
                   'python3 -c "import socket; s = socket.create_connection((\\'127.0.0.1\\', %d), timeout=30); s.sendall(b\\'hi\\'); print(s.recv(100).decode().strip())"; sleep 2' % free_r]
            p = subprocess.Popen(ssh, stdout=subprocess.PIPE, text=True)
            print('remote:', p.stdout.readline().strip(), flush=True)
            c = socket.create_connection(('127.0.0.1', free_l), timeout=30)
            c.sendall(b'hi')
            print('local:', c.recv(100).decode().strip(), flush=True)
            c.close()
            print('ssh exited', p.wait(timeout=60), flush=True)
            """
        let outcome = await ChildProgram.run(["python3", "-c", script, "\(server.port)"], stderrToStdout: true)
        #expect(outcome.stdout.contains("remote: from the client"), "\(outcome)")
        #expect(outcome.stdout.contains("local: from the workspace"), "\(outcome)")
        #expect(outcome.stdout.contains("ssh exited 0"), "\(outcome)")
    }
}

/// The reference's switches: file transfers and each kind of port forward refused.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHPolicyTests {
    @Test func blockedFileTransferExitsWith65AndTheReferencesMessage() async throws {
        let reports = ReportRecorder()
        let server = try await SSHSessionTests.Server(policy: SSHPolicy(blockFileTransfer: true), upward: reports)
        defer { Task { await server.stop() } }
        let scp = await server.ssh("scp -t /tmp")
        #expect(scp.status == 65 && scp.stdout == "\u{02}File transfer has been disabled.\n", "\(scp)")
        // In the connection log as the reference has it.
        #expect(await eventually(timeout: .seconds(30)) { reports.all.contains { $0.action == .disconnect } })
        let disconnect = try #require(reports.all.first { $0.action == .disconnect })
        #expect(disconnect.statusCode == 65 && disconnect.reason == "file transfer blocked", "\(disconnect)")
        #expect(reports.all.filter { $0.action == .connect }.count == 1)
        let rsync = await server.ssh("/usr/bin/rsync --server .")
        #expect(rsync.status == 65, "\(rsync)")
        // Other commands still run.
        let echo = await server.ssh("echo fine")
        #expect(echo.status == 0 && echo.stdout == "fine\n")
        let sftp = await ChildProgram.run(
            ["sh", "-c", "echo ls | sftp -P \(server.port) \(SSHTransferAndForwardingTests.options) 127.0.0.1; echo status $?"], stderrToStdout: true)
        #expect(sftp.stdout.hasSuffix("status 1\n") || sftp.stdout.contains("status 255"), "\(sftp)")
    }

    @Test func blockedForwardsAreRefused() async throws {
        let server = try await SSHSessionTests.Server(policy: SSHPolicy(blockLocalPortForwarding: true, blockReversePortForwarding: true))
        defer { Task { await server.stop() } }
        let local = await server.ssh("true", options: ["-o", "ExitOnForwardFailure=yes", "-L", "127.0.0.1:0:127.0.0.1:22", "-W", "127.0.0.1:22"])
        #expect(local.status != 0, "\(local)")
        // The client hears the reference's reason and text.
        let refused = await ChildProgram.run(
            [
                "ssh", "-F", "/dev/null", "-p", "\(server.port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-W", "127.0.0.1:22", "127.0.0.1",
            ], stderrToStdout: true)
        #expect(refused.stdout.contains("open failed: administratively prohibited: port forwarding is disabled"), "\(refused)")
        let remote = await server.ssh("true", options: ["-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:22"])
        #expect(remote.status == 255, "\(remote)")
        let allowed = try await SSHSessionTests.Server()
        defer { Task { await allowed.stop() } }
        let fine = await allowed.ssh("true", options: ["-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:22"])
        #expect(fine.status == 0, "\(fine)")
    }
}
