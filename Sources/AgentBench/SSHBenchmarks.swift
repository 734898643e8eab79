import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench ssh`: the agent's SSH server (`--ssh-address` on loopback) against OpenSSH's
/// `sshd` started here on loopback with its own configuration and throwaway keys, both
/// driven by the same OpenSSH client: a 100 MiB `scp`, the echo of one keystroke through a
/// terminal, connection set-up (`ssh host true`), and RSS per idle session.
struct SSHBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh", abstract: "SSH: scp throughput, terminal echo latency, set-up time and RSS per idle session against sshd.")

    @Option(help: "The workspace-agent binary (default: next to this one).") var binary: String?
    @Option(help: "MiB copied per scp.") var mebibytes = 100
    @Option(help: "Keystrokes echoed per side and round.") var keystrokes = 200
    @Option(help: "Connections set up per side.") var connections = 20
    @Option(help: "Idle sessions held open per side for the RSS figure.") var idleSessions = 20

    func run() throws {
        let agentBinary = try Bench.agentBinary(binary)
        // posix_spawn takes paths, not names.
        func tool(_ name: String) -> String { Bench.onPath(name) ?? name }
        guard access("/usr/sbin/sshd", X_OK) == 0, Bench.onPath("ssh") != nil, Bench.onPath("scp") != nil else {
            throw ValidationError("needs OpenSSH: apt-get install openssh-server openssh-client openssh-sftp-server (make bench installs them)")
        }
        let directory = NSTemporaryDirectory() + "agent-bench-ssh-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)

        // sshd: its own host key, a client key it accepts, loopback only.
        for (name, comment) in [("host", "bench host"), ("client", "bench client")] {
            _ = Bench.wait(Bench.spawn([tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", directory + "/" + name]))
        }
        try FileManager.default.copyItem(atPath: directory + "/client.pub", toPath: directory + "/authorized_keys")
        let sshdPort = Bench.freePort()
        let config = """
            Port \(sshdPort)
            ListenAddress 127.0.0.1
            HostKey \(directory)/host
            PidFile \(directory)/sshd.pid
            AuthorizedKeysFile \(directory)/authorized_keys
            PermitRootLogin yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            PrintMotd no
            MaxStartups 200
            MaxSessions 200
            UseDNS no
            Subsystem sftp /usr/lib/openssh/sftp-server
            LogLevel ERROR
            """
        try config.write(toFile: directory + "/sshd_config", atomically: true, encoding: .utf8)
        let sshd = Bench.spawn(["/usr/sbin/sshd", "-D", "-e", "-f", directory + "/sshd_config"], stdoutPath: directory + "/sshd.log")
        defer {
            kill(sshd, SIGTERM)
            _ = Bench.wait(sshd)
        }
        let agentPort = Bench.freePort()
        let agent = Bench.spawn(
            [
                agentBinary, "--http-address", "127.0.0.1:\(Bench.freePort())", "--state-dir", directory + "/state", "--log-level", "warning",
                "--prometheus-address", "", "--socket-server-enabled", "false", "--ssh-address", "127.0.0.1:\(agentPort)",
            ],
            stdoutPath: directory + "/agent.log")
        defer {
            kill(agent, SIGTERM)
            _ = Bench.wait(agent)
        }
        let options = [
            "-F", "/dev/null", "-i", directory + "/client", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
        ]
        func ssh(_ port: Int, _ command: String) -> [String] { [tool("ssh")] + options + ["-p", "\(port)", "127.0.0.1", command] }
        for port in [sshdPort, agentPort] {
            var ready = false
            for _ in 0..<300 where !ready {
                ready = Bench.wait(Bench.spawn(ssh(port, "true"))) == 0
                if !ready { usleep(20_000) }
            }
            guard ready else { throw ValidationError("no SSH server answered on port \(port); see \(directory)") }
        }
        print("agent-bench ssh: sshd (OpenSSH, loopback, ed25519) against the agent's --ssh-address; same client")

        // RSS per idle session, first (later transfers leave freed heap that new sessions
        // would reuse unseen): the agent's growth, against what sshd's per-connection
        // processes hold (each connection is a process of its own there).
        func sshdTotalRSS() -> Int {
            var total = 0
            for pid in Self.processes(named: "sshd") where pid != sshd { total += Bench.rss(pid) }
            return total
        }
        let agentBefore = Bench.rss(agent, field: "RssAnon")
        let sshdBefore = sshdTotalRSS()
        var idle: [pid_t] = []
        for port in [agentPort, sshdPort] {
            for _ in 0..<idleSessions { idle.append(Bench.spawn(ssh(port, "exec sleep 301"))) }
        }
        // Every session's process runs (bounded: 60 s).
        for _ in 0..<600 where Self.processes(named: "sleep").count < 2 * idleSessions { usleep(100_000) }
        let agentGrowth = max(0, Bench.rss(agent, field: "RssAnon") - agentBefore) / idleSessions
        let sshdGrowth = max(0, sshdTotalRSS() - sshdBefore) / idleSessions
        for pid in idle { kill(pid, SIGTERM) }
        for pid in idle { _ = Bench.wait(pid) }
        report(
            "RSS per idle session", value: String(format: "%.0f KiB", Double(agentGrowth) / 1024), baseline: String(format: "%.0f KiB", Double(sshdGrowth) / 1024),
            ratio: Double(agentGrowth) / Double(max(sshdGrowth, 1)), goal: "reported (agent: its private memory's growth; baseline: sshd's per-connection processes)", met: true)

        // Set-up: `ssh host true`, alternating sides.
        var agentSetup: [Double] = []
        var sshdSetup: [Double] = []
        for _ in 0..<connections {
            for (port, into) in [(agentPort, 0), (sshdPort, 1)] {
                let start = Bench.now()
                _ = Bench.wait(Bench.spawn(ssh(port, "true")))
                let elapsed = Double(Bench.now() - start)
                if into == 0 { agentSetup.append(elapsed) } else { sshdSetup.append(elapsed) }
            }
        }
        let setup = (Bench.median(agentSetup), Bench.median(sshdSetup))
        report(
            "connection set-up, ssh host true (median)", value: Bench.format(setup.0), baseline: Bench.format(setup.1),
            ratio: setup.0 / setup.1, goal: "reported (baseline: sshd)", met: true)

        // Throughput: scp of the same file on each side (into a file beside it), three rounds each.
        let file = directory + "/payload"
        _ = Bench.wait(Bench.spawn([tool("head"), "-c", "\(mebibytes << 20)", "/dev/urandom"], stdoutPath: file))
        var agentRates: [Double] = []
        var sshdRates: [Double] = []
        for _ in 0..<3 {
            for (port, into) in [(agentPort, 0), (sshdPort, 1)] {
                let start = Bench.now()
                let status = Bench.wait(Bench.spawn([tool("scp")] + options + ["-P", "\(port)", file, "127.0.0.1:\(directory)/copy-\(port)"]))
                let seconds = Double(Bench.now() - start) / 1e9
                guard status == 0 else { throw ValidationError("scp to port \(port) failed (\(status))") }
                let rate = Double(mebibytes) / seconds
                if into == 0 { agentRates.append(rate) } else { sshdRates.append(rate) }
            }
        }
        let rates = (Bench.median(agentRates), Bench.median(sshdRates))
        report(
            "scp \(mebibytes) MiB (median)", value: String(format: "%.0f MiB/s", rates.0), baseline: String(format: "%.0f MiB/s", rates.1),
            ratio: rates.0 / rates.1, goal: ">= 0.8x sshd", met: rates.0 / rates.1 >= 0.8)

        // Echo: one keystroke through a terminal and back (the remote terminal's own echo).
        let driver = """
            import os, subprocess, sys, time
            argv = sys.argv[2:]
            p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
            time.sleep(0.5)
            os.set_blocking(p.stdout.fileno(), True)
            # Swallow what the terminal says first (a prompt-less `cat`: nothing but set-up bytes).
            samples = []
            for i in range(int(sys.argv[1])):
                start = time.perf_counter_ns()
                p.stdin.write(b'x')
                got = b''
                while b'x' not in got:
                    got += p.stdout.read(1)
                samples.append(time.perf_counter_ns() - start)
            p.stdin.write(b'\\x03')
            p.kill()
            samples.sort()
            print(samples[len(samples) // 2])
            """
        func echo(_ port: Int) -> Double {
            let out = directory + "/echo-\(port)"
            _ = Bench.wait(Bench.spawn([tool("python3"), "-c", driver, "\(keystrokes)"] + [tool("ssh"), "-tt"] + options + ["-p", "\(port)", "127.0.0.1", "cat > /dev/null"], stdoutPath: out))
            return Double((try? String(contentsOfFile: out, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? .nan
        }
        var agentEcho: [Double] = []
        var sshdEcho: [Double] = []
        for _ in 0..<3 {
            agentEcho.append(echo(agentPort))
            sshdEcho.append(echo(sshdPort))
        }
        let echoes = (Bench.median(agentEcho), Bench.median(sshdEcho))
        report(
            "keystroke echo through a terminal (median)", value: Bench.format(echoes.0), baseline: Bench.format(echoes.1),
            ratio: echoes.0 / echoes.1, goal: "<= 1.2x sshd", met: echoes.0 / echoes.1 <= 1.2)

    }

    /// Every process whose `comm` is `name`.
    static func processes(named name: String) -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { Int32($0) }.filter { pid in
            (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == name
        }
    }
}
