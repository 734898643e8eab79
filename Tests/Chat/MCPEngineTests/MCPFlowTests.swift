import AgentCore
import AgentTestSupport
import MCPEngine
import MCPWire
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a flooding server can make the agent do, with real servers (`Servers/flood_mcp.py`):
/// its unasked requests, its stderr and an endless answer are read at bounded rates, and
/// the buffers of every server share one memory budget. Each bound is checked against the
/// test's own clock as an upper bound (a loaded host reads less, never more).
@Suite(.timeLimit(.minutes(3)))
struct MCPFlowTests {
    /// A stdio flood server started directly, its messages counted and its pings answered
    /// as a session would.
    final class Flood: Sendable {
        let process: MCPStdioProcess
        let started: ContinuousClock.Instant
        private let counts = FloodCounts()

        init(_ mode: String, _ args: [String] = [], budget: MCPMemoryBudget = MCPMemoryBudget()) throws {
            started = .now
            let box = ProcessBox()
            let counts = self.counts
            process = try MCPStdioProcess.start(
                try MCPTestServers.command("flood_mcp.py", [mode] + args), timing: .init(stdinGrace: .zero, termGrace: .seconds(5)),
                budget: budget, stderrLine: { _ in counts.state.withLock { $0.stderrLines += 1 } },
                events: { event in
                    switch event {
                    case .message(.request(let id, _, _)):
                        counts.state.withLock { $0.requests += 1 }
                        try? box.process.withLock { $0 }?.send(JSONRPCMessage.result(id: id, .object([])).encodedLine())
                    case .message(.notification("flood/progress", let params)):
                        let written = params?["written"]?.intValue ?? 0
                        counts.state.withLock { $0.written = max($0.written, written) }
                    case .ended(let why):
                        counts.state.withLock { $0.ended = $0.ended ?? why }
                    default: break
                    }
                })
            box.process.withLock { $0 = process }
            let initialize = JSONRPCMessage.request(id: .number(1), method: "initialize", params: .object([]))
            try process.send(initialize.encodedLine())
        }

        var requests: Int { counts.state.withLock { $0.requests } }
        var written: Int { counts.state.withLock { $0.written } }
        var ended: String? { counts.state.withLock { $0.ended } }
        var elapsed: Double { (ContinuousClock.now - started).inSeconds }

        func close() async { await process.close() }
    }

    final class FloodCounts: Sendable {
        let state = Mutex<(requests: Int, written: Int, ended: String?, stderrLines: Int)>((0, 0, nil, 0))
    }

    final class ProcessBox: Sendable {
        let process = Mutex<MCPStdioProcess?>(nil)
    }

    @Test func aPingFloodIsAnsweredAtTheUnsolicitedRate() async throws {
        let flood = try Flood("ping-flood")
        let burst = Double(MCPLimits.unsolicitedBurst), rate = Double(MCPLimits.unsolicitedPerSecond)
        // Past the burst, and then past two seconds' refill: each time no more than the
        // bucket allows since the start (the server writes thousands a millisecond).
        for target in [Int(burst) + 1, Int(burst + 2 * rate)] {
            #expect(await eventually { flood.requests >= target })
            let requests = flood.requests, bound = burst + rate * flood.elapsed + 1
            #expect(Double(requests) <= bound, "\(requests) pings handled in \(flood.elapsed) s")
        }
        #expect(flood.ended == nil)
        await flood.close()
    }

    @Test func aStderrFloodIsReadAtItsRate() async throws {
        let flood = try Flood("stderr-flood")
        let mib = Double(1 << 20), rate = Double(MCPLimits.stderrBytesPerSecond)
        // Six MiB written takes the agent's bound five seconds to read; the server's count
        // can lead what was read by the pipe (1 MiB) and one step of its own (1 MiB).
        #expect(await eventually { flood.written >= 6 << 20 })
        let written = Double(flood.written), bound = rate + rate * flood.elapsed + 2 * mib + 64 * 1024
        #expect(written <= bound, "\(written) stderr bytes written in \(flood.elapsed) s")
        #expect(flood.ended == nil)
        await flood.close()
    }

    @Test func anEndlessEventStreamFailsItsCall() async throws {
        let server = try await MCPHTTPTestServer.start("flood_mcp.py", ["sse-comments"])
        defer { Task { await server.close() } }
        let session = try await MCPTestServers.connect(.streamableHTTP(url: server.url("/mcp"), headers: [:]))
        await #expect {
            _ = try await session.callTool("endless", arguments: nil, timeout: .seconds(150))
        } throws: { error in
            (error as? MCPError)?.message == "tools/call: the server sent more than \(MCPLimits.maxExchangeBytes) bytes in answer to one request"
        }
        // The session goes on.
        #expect(try await session.listTools().map(\.name) == ["endless"])
        await session.close()
        await server.close()
    }

    @Test func serversShareOneMemoryBudget() async throws {
        let budget = MCPMemoryBudget(limit: 16 << 20, releaseMemory: {})
        // Four servers each writing 8 MiB of one message: at most two fit, the others fail.
        // Settled when each server has failed or holds its whole message (8 MiB or more);
        // 120 s: in a loaded full run the last 18 KiB of the two that fit took longer than 30.
        let floods = try (0..<4).map { _ in try Flood("long-line", ["8"], budget: budget) }
        #expect(
            await eventually(timeout: .seconds(120)) {
                let holding = floods.filter { $0.ended == nil }.count
                return holding < floods.count && budget.inUse >= holding * (8 << 20)
            }, "\(floods.map(\.ended)) in use \(budget.inUse)")
        #expect(budget.peak <= budget.limit)
        let refused = floods.compactMap(\.ended).filter { $0.contains("the MCP servers' buffers are full (16 MiB for all servers)") }
        #expect(!refused.isEmpty, "\(floods.map(\.ended))")
        for flood in floods { await flood.close() }
        #expect(budget.inUse == 0)
    }
}

/// The flow bounds on a clock the test drives.
@Suite struct MCPInboundLimiterTests {
    let start = ContinuousClock.now
    let ping = JSONRPCMessage.request(id: .number(1), method: "ping", params: nil)
    let answer = JSONRPCMessage.result(id: .number(1), .object([]))

    @Test func unsolicitedMessagesPastTheBurstAreDroppedAndReadingWaits() {
        var limiter = MCPInboundLimiter(unsolicitedBurst: 10, unsolicitedPerSecond: 5, now: start)
        let burst = (0..<10).map { _ in limiter.admit(ping, now: start) }
        #expect(burst.allSatisfy { $0 })
        let eleventh = limiter.admit(ping, now: start), anAnswer = limiter.admit(answer, now: start)
        #expect(!eleventh && anAnswer && limiter.dropped == 1)
        // Reading waits for a tenth of the burst (one token at 5 a second: 200 ms).
        let early = limiter.mayRead(now: start + .milliseconds(150))
        #expect(!early)
        #expect(limiter.readyAt(now: start + .milliseconds(150)) == start + .milliseconds(200))
        let onTime = limiter.mayRead(now: start + .milliseconds(200))
        let refilled = limiter.admit(ping, now: start + .milliseconds(200)), past = limiter.admit(ping, now: start + .milliseconds(200))
        #expect(onTime && refilled && !past)
    }

    @Test func bytesPastTheBurstWaitForTheRefill() {
        var limiter = MCPInboundLimiter(bytesPerSecond: 1000, burstBytes: 4000, now: start)
        limiter.read(4000, now: start)
        let spent = limiter.mayRead(now: start)
        #expect(!spent)
        #expect(limiter.readyAt(now: start) == start + .milliseconds(1))
        limiter.read(1000, now: start + .milliseconds(1))
        #expect(limiter.readyAt(now: start + .milliseconds(1)) == start + .milliseconds(1001))
        limiter.readStderr(MCPLimits.stderrBytesPerSecond + 10, now: start)
        #expect(limiter.stderrReadyAt(now: start) > start)
    }

    @Test func theBudgetRefusesGrowthPastItsLimitAndTrimsAfterABurst() {
        let trims = Mutex(0)
        let budget = MCPMemoryBudget(limit: 800, releaseMemory: { trims.withLock { $0 += 1 } })
        var a = MCPMemoryCharge(budget), b = MCPMemoryCharge(budget)
        let first = a.update(500), tooMuch = b.update(400)
        #expect(first && !tooMuch && b.bytes == 0 && budget.inUse == 500)
        let fits = b.update(300)
        #expect(fits)
        #expect(budget.peak == 800)
        a.release()
        #expect(trims.withLock { $0 } == 0)
        b.release()
        #expect(budget.inUse == 0 && trims.withLock { $0 } == 1)
    }
}
