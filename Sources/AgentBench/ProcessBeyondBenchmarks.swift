import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The figures for `agent-bench proc`: the stdin round trip, the await's wake-up, and
/// what spooling the output to disk costs the drain.
extension ProcessBenchmarks {
    func beyondTheReference(binary: String, client: BlockingHTTP, port: Int) throws {
        stdinRoundTrip(client: client, port: port)
        try awaitWakeUp(client: client, port: port)
        spoolCost(binary: binary, spooled: client)
    }

    /// `POST /stdin` → the echo seen on the output stream, against a raw pipe into `cat` and out.
    func stdinRoundTrip(client: BlockingHTTP, port: Int) {
        guard let (status, body) = client.request("POST", "/api/v0/processes/start", body: #"{"command":"exec cat","stdin":true}"#),
            status == 200, let id = jsonString(body, "id"),
            let stream = BenchWebSocket(port: port, path: "/api/v0/processes/\(id)/stream")
        else { fatalError("could not start cat with stdin") }
        let (catPid, catIn, catOut) = Self.spawnPiped(["/bin/cat"])
        let line = Array("ping-000000\n".utf8)
        var scratch = [UInt8](repeating: 0, count: line.count)
        var agent: [Double] = []
        var raw: [Double] = []
        for i in 0..<(iterations + 20) {
            var payload = line
            let digits = Array(String(format: "%06d", i % 1_000_000).utf8)
            payload.replaceSubrange(5..<11, with: digits)
            let a0 = Bench.now()
            guard client.request("POST", "/api/v0/processes/\(id)/stdin", body: String(decoding: payload, as: UTF8.self))?.0 == 200,
                stream.readBinary(payload.count) == payload
            else { fatalError("stdin round trip failed") }
            let a1 = Bench.now()
            let r0 = Bench.now()
            _ = payload.withUnsafeBytes { write(catIn, $0.baseAddress, $0.count) }
            Self.readExactly(catOut, payload.count, into: &scratch)
            let r1 = Bench.now()
            if i >= 20 {
                agent.append(Double(a1 - a0))
                raw.append(Double(r1 - r0))
            }
        }
        close(catIn)
        close(catOut)
        _ = Bench.wait(catPid)
        _ = client.request("POST", "/api/v0/processes/\(id)/stdin/close", body: "{}")
        let agentMedian = Bench.median(agent)
        let rawMedian = Bench.median(raw)
        // The goal holds on any host: the agent's round trip is one HTTP exchange, the
        // child's echo through two pipes and one WebSocket frame; against two HTTP round
        // trips (the exchange and the frame's delivery, generously) and two raw echoes.
        var rtts: [Double] = []
        for _ in 0..<iterations {
            let h0 = Bench.now()
            _ = client.request("GET", "/healthz")
            rtts.append(Double(Bench.now() - h0))
        }
        let budget = 2 * rawMedian + 2 * Bench.median(rtts)
        report(
            "stdin round trip (median)", value: Bench.format(agentMedian), baseline: Bench.format(rawMedian),
            ratio: agentMedian / rawMedian, goal: "<= 2 pipe|cat + 2 GET /healthz (\(Bench.format(budget)))",
            met: agentMedian <= budget)
    }

    /// From the moment a line is written to the answer of an await waiting for it, against the
    /// same line read straight from the pipe (`cat` reading a FIFO either way).
    func awaitWakeUp(client: BlockingHTTP, port: Int) throws {
        let fifo = NSTemporaryDirectory() + "agent-bench-await-\(getpid())"
        unlink(fifo)
        guard mkfifo(fifo, 0o600) == 0 else { throw ValidationError("mkfifo failed") }
        defer { unlink(fifo) }
        guard let (status, body) = client.request("POST", "/api/v0/processes/start", body: #"{"command":"exec cat \#(fifo)"}"#),
            status == 200, let id = jsonString(body, "id")
        else { fatalError("could not start cat") }
        let writer = open(fifo, O_WRONLY)
        defer { close(writer) }
        let (rawPid, rawIn, rawOut) = Self.spawnPiped(["/bin/cat"])
        defer {
            close(rawIn)
            close(rawOut)
            _ = Bench.wait(rawPid)
        }
        var agent: [Double] = []
        var raw: [Double] = []
        let rounds = min(iterations, 100)
        var scratch = [UInt8](repeating: 0, count: 64)
        for i in 0..<rounds {
            let mark = "mark-\(i)-end"
            let answered = AnswerTime()
            let thread = Thread {
                guard let waiter = BlockingHTTP(port: port) else { fatalError("connect failed") }
                let reply = waiter.request("GET", "/api/v0/processes/\(id)/output?until_literal=\(mark)&timeout=30s")
                answered.set(Bench.now(), matched: reply.map { String(decoding: $0.1, as: UTF8.self).contains("\"matched\"") } ?? false)
            }
            thread.start()
            usleep(20_000)  // the await is registered (it answers only after the write below)
            let line = Array((mark + "\n").utf8)
            let w0 = Bench.now()
            _ = line.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
            let (at, matched) = answered.wait()
            guard matched else { fatalError("the await did not match") }
            agent.append(Double(at - w0))
            let r0 = Bench.now()
            _ = line.withUnsafeBytes { write(rawIn, $0.baseAddress, $0.count) }
            Self.readExactly(rawOut, line.count, into: &scratch)
            raw.append(Double(Bench.now() - r0))
        }
        let agentMedian = Bench.median(agent)
        let rawMedian = Bench.median(raw)
        report(
            "await wake-up after the write (median)", value: Bench.format(agentMedian), baseline: Bench.format(rawMedian),
            ratio: agentMedian / rawMedian, goal: "< 5 ms", met: agentMedian < 5e6)
        _ = client.request("POST", "/api/v0/processes/\(id)/signal", body: #"{"signal":"kill"}"#)
    }

    /// The drain with every byte spooled to disk against an agent started with
    /// `--proc-spool false`, alternating (same-moment pairs), median ratio.
    func spoolCost(binary: String, spooled: BlockingHTTP) {
        let plainPort = Bench.freePort()
        let plain = launch(binary, port: plainPort, extra: ["--proc-spool", "false"])
        defer { stop(plain) }
        guard let unspooled = connectWhenHealthy(port: plainPort) else { fatalError("agent did not start") }
        var ratios: [Double] = []
        var spooledRates: [Double] = []
        var plainRates: [Double] = []
        for _ in 0..<rounds {
            let p0 = Bench.now()
            _ = runThroughAPI(unspooled, "head -c \(bytes) /dev/zero")
            let plainNs = Double(Bench.now() - p0)
            let s0 = Bench.now()
            _ = runThroughAPI(spooled, "head -c \(bytes) /dev/zero")
            let spooledNs = Double(Bench.now() - s0)
            spooledRates.append(Double(bytes) / spooledNs * 1e9 / 1048576)
            plainRates.append(Double(bytes) / plainNs * 1e9 / 1048576)
            ratios.append(plainNs / spooledNs)
        }
        let ratio = Bench.median(ratios)
        report(
            "drain with the output spooled", value: String(format: "%.0f MiB/s", Bench.median(spooledRates)),
            baseline: String(format: "%.0f MiB/s", Bench.median(plainRates)), ratio: ratio,
            goal: ">= 0.8x --proc-spool false", met: ratio >= 0.8)
    }

    /// Reads exactly `count` bytes (at most `scratch.count`) from `fd`; the child ending first is fatal.
    static func readExactly(_ fd: Int32, _ count: Int, into scratch: inout [UInt8]) {
        var got = 0
        while got < count {
            let n = scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, count - got) }
            guard n > 0 else { fatalError("cat ended") }
            got += n
        }
    }

    /// Spawns `argv` with its stdin and stdout on pipes: (pid, our write end, our read end).
    static func spawnPiped(_ argv: [String]) -> (pid_t, Int32, Int32) {
        var input: [Int32] = [-1, -1]
        var output: [Int32] = [-1, -1]
        precondition(pipe(&input) == 0 && pipe(&output) == 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_addclose(&actions, input[1])
        posix_spawn_file_actions_addclose(&actions, output[0])
        var pid: pid_t = 0
        let args = argv.map { strdup($0) } + [nil]
        defer { for a in args { free(a) } }
        precondition(posix_spawn(&pid, argv[0], &actions, nil, args, environ) == 0)
        close(input[0])
        close(output[1])
        return (pid, input[1], output[0])
    }
}

/// When an await's answer arrived (set by the thread that waited for it).
final class AnswerTime: @unchecked Sendable {
    // Safety: `value` is guarded by `condition` (set once by the waiting thread, read after).
    private let condition = NSCondition()
    private var value: (UInt64, Bool)?

    func set(_ at: UInt64, matched: Bool) {
        condition.lock()
        value = (at, matched)
        condition.broadcast()
        condition.unlock()
    }

    func wait() -> (UInt64, Bool) {
        condition.lock()
        defer { condition.unlock() }
        while value == nil { condition.wait() }
        return value!
    }
}
