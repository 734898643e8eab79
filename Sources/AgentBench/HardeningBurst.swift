import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench hardening --only burst`: the agent's RSS at rest, with a burst of WebSockets
/// and idle connections open, and after they all closed (the heap given back to the OS).
extension HardeningBenchmarks {
    /// WebSockets of the burst (the agent's whole WebSocket budget).
    static let burstWebSockets = 3072
    /// Idle plain connections of the burst (connected, no request sent).
    static let burstIdle = 500
    /// Messages each WebSocket sends (each answered by one small error message).
    static let burstMessages = 3

    func burst(_ runner: ProcessBenchmarks, _ binary: String) throws {
        raiseDescriptorLimit()
        let port = Bench.freePort()
        let daemon = runner.launch(binary, port: port)
        defer { runner.stop(daemon) }
        guard runner.connectWhenHealthy(port: port) != nil else { throw ValidationError("agent did not start") }
        usleep(1_000_000)
        let start = Bench.rss(daemon)
        let sampler = PeakSampler(pid: daemon)
        sampler.start()
        var sockets: [BenchWebSocket] = []
        sockets.reserveCapacity(Self.burstWebSockets)
        for _ in 0..<Self.burstWebSockets {
            guard let socket = BenchWebSocket(port: port, path: "/api/v0/git/watch") else { break }
            for index in 0..<Self.burstMessages {
                // An unknown type: the agent answers each with a small error message.
                guard socket.send(text: #"{"type":"burst-\#(index)"}"#), socket.next(timeoutMs: 10_000) != nil else { break }
            }
            sockets.append(socket)
        }
        var idle: [Int32] = []
        for _ in 0..<Self.burstIdle {
            guard let fd = Bench.connect(port: port) else { break }
            idle.append(fd)
        }
        // Every connection is registered once /metrics counts them (the scrape's own included).
        let open = sockets.count + idle.count
        _ = waitForConnections(port: port, atLeast: open + 1, atMost: Int.max)
        let peak = sampler.stop()
        let webSockets = sockets.count
        sockets.removeAll()
        for fd in idle { close(fd) }
        let closed = waitForConnections(port: port, atLeast: 0, atMost: 1)
        // Trims follow the last close at 0.5 s and 2.5 s (then 10.5 s, 42.5 s: what closing
        // connections hold is freed over the seconds after); read the RSS after the second.
        usleep(4_000_000)
        let after = Bench.rss(daemon)
        print("burst: \(webSockets) WebSockets + \(idle.count) idle connections; all closed: \(closed)")
        report("RSS at start", value: Bench.mib(start), baseline: "-", ratio: 1, goal: "(information)", met: true)
        report(
            "RSS with the burst open (peak)", value: Bench.mib(peak), baseline: Bench.mib(start),
            ratio: Double(peak) / Double(max(start, 1)), goal: "(information)", met: true)
        let left = after - start
        report(
            "RSS after the burst, over start", value: Bench.mib(left), baseline: Bench.mib(start),
            ratio: Double(left) / Double(max(start, 1)), goal: "<= 40 MiB", met: left <= 40 << 20)
    }

    /// Polls /metrics until `agent_http_connections` (the poll's own connection included) is
    /// within the bounds (at most 30 s);
    /// true when it got there.
    func waitForConnections(port: Int, atLeast low: Int, atMost high: Int) -> Bool {
        for _ in 0..<300 {
            // A new connection each time: a kept-alive one may have met its idle deadline.
            if let (status, body) = BlockingHTTP(port: port)?.request("GET", "/metrics"), status == 200 {
                let text = String(decoding: body, as: UTF8.self)
                for line in text.split(separator: "\n") where line.hasPrefix("agent_http_connections ") {
                    if let value = Double(line.split(separator: " ").last ?? ""), Int(value) >= low, Int(value) <= high { return true }
                }
            }
            usleep(100_000)
        }
        return false
    }

    /// The bench holds 3 500 sockets: the soft descriptor limit goes up to the hard one.
    func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
