import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench hardening`: memory after a burst of connections, memory under stalled
/// stream subscribers, and the SIGTERM bound with hostile clients connected.
struct HardeningBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hardening",
        abstract: "RSS after a burst of connections, RSS per stalled stream subscriber, and SIGTERM-to-exit with hostile clients."
    )

    @Option(help: "Processes, each with --subscribers stalled subscribers.")
    var processes = 8

    @Option(help: "Stalled subscribers per process (at most 16).")
    var subscribers = 16

    @Option(help: "Bytes each process writes.")
    var bytes = 200_000_000

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?

    @Option(help: "burst: run only the memory-after-a-burst part (default: every part).")
    var only: String?

    func run() throws {
        let binary = try Bench.agentBinary(agent)
        let runner = ProcessBenchmarks()
        if only == nil || only == "burst" { try burst(runner, binary) }
        if only == "burst" { return }
        print("agent-bench hardening: \(processes) processes x \(subscribers) stalled subscribers, \(bytes / 1_000_000) MB each")

        // 1. Stalled subscribers.
        let port = Bench.freePort()
        let daemon = runner.launch(binary, port: port)
        guard let client = runner.connectWhenHealthy(port: port) else { throw ValidationError("agent did not start") }
        usleep(500_000)
        let before = Bench.rss(daemon)
        var ids: [String] = []
        for _ in 0..<processes {
            guard
                let (status, body) = client.request(
                    "POST", "/api/v0/processes/start", body: #"{"command":"sleep 1; head -c \#(bytes) /dev/zero; sleep 600"}"#),
                status == 200, let id = jsonString(body, "id")
            else { throw ValidationError("start failed") }
            ids.append(id)
        }
        var sockets: [Int32] = []
        for id in ids {
            for _ in 0..<subscribers {
                let fd = (Bench.connect(port: port, receiveBuffer: 4096) ?? -1)
                let handshake = "GET /api/v0/processes/\(id)/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                _ = handshake.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                sockets.append(fd)
            }
        }
        // The writers run while the subscribers never read; sample for 10 s (the stall
        // timeout is 30 s, so nobody is disconnected yet).
        let sampler = PeakSampler(pid: daemon)
        sampler.start()
        usleep(10_000_000)
        let peak = sampler.stop()
        for fd in sockets { close(fd) }
        usleep(3_000_000)
        let after = Bench.rss(daemon)
        runner.stop(daemon)
        let count = processes * subscribers
        let perSubscriber = Double(max(peak - before, 0)) / Double(count)
        report(
            "RSS per stalled subscriber (\(count))", value: Bench.mib(Int(perSubscriber)), baseline: Bench.mib(1 << 20),
            ratio: perSubscriber / Double(1 << 20), goal: "<= 1.5 MiB (baseline: the 1 MiB queue bound)",
            met: perSubscriber <= 1.5 * 1048576)
        let left = after - before
        report(
            "RSS after they leave, over start", value: Bench.mib(left), baseline: Bench.mib(before),
            ratio: Double(left) / Double(max(before, 1)), goal: "<= 5 MiB", met: left <= 5 << 20)

        // 2. SIGTERM to exit: a quiet agent against one with hostile clients.
        let quietPort = Bench.freePort()
        let quiet = runner.launch(binary, port: quietPort)
        _ = runner.connectWhenHealthy(port: quietPort)
        let quietTime = timeToExit(quiet)

        for ignoring in [false, true] {
            let hostileTime = try hostileShutdown(runner, binary, ignoringTerm: ignoring)
            let name = ignoring ? "  ... and a process ignoring SIGTERM" : "SIGTERM -> exit, hostile clients"
            report(
                name, value: Bench.format(hostileTime), baseline: Bench.format(quietTime),
                ratio: hostileTime / max(quietTime, 1),
                goal: ignoring ? "<= 7 s (the 5 s grace, then SIGKILL)" : "<= 7 s", met: hostileTime <= 7e9)
        }
    }

    /// An agent with a half-sent request, a silent connection, a stream subscriber that never
    /// reads, a setsid grandchild holding a pipe and (optionally) a process that ignores
    /// SIGTERM: nanoseconds from SIGTERM to its exit.
    func hostileShutdown(_ runner: ProcessBenchmarks, _ binary: String, ignoringTerm: Bool) throws -> Double {
        let hostilePort = Bench.freePort()
        let hostile = runner.launch(binary, port: hostilePort)
        guard let hostileClient = runner.connectWhenHealthy(port: hostilePort) else { throw ValidationError("agent did not start") }
        var chatty = ""
        var commands = ["setsid sleep 1000 & echo started; sleep 1000", "head -c 100000000 /dev/zero; sleep 1000"]
        if ignoringTerm { commands.insert("trap '' TERM; sleep 1000", at: 0) }
        for command in commands {
            guard let (_, body) = hostileClient.request("POST", "/api/v0/processes/start", body: #"{"command":"\#(command)"}"#),
                let id = jsonString(body, "id")
            else { throw ValidationError("start failed") }
            chatty = id
        }
        let partial = (Bench.connect(port: hostilePort) ?? -1)
        _ = "POST /api/v0/processes/start HTTP/1.1\r\nHost: x\r\nContent-Le".withCString { send(partial, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        let silent = (Bench.connect(port: hostilePort) ?? -1)
        let stalled = (Bench.connect(port: hostilePort, receiveBuffer: 4096) ?? -1)
        _ = "GET /api/v0/processes/\(chatty)/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            .withCString { send(stalled, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        usleep(500_000)
        let time = timeToExit(hostile)
        for fd in [partial, silent, stalled] { close(fd) }
        return time
    }

    /// Nanoseconds from SIGTERM to the agent's exit.
    func timeToExit(_ pid: pid_t) -> Double {
        let start = Bench.now()
        kill(pid, SIGTERM)
        _ = Bench.wait(pid)
        return Double(Bench.now() - start)
    }
}
