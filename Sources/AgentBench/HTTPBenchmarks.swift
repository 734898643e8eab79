import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Hummingbird
import Logging
import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench http`: the agent's HTTP layer against a bare SwiftNIO HTTP/1.1 server (the
/// floor of this stack) answering the same bytes, each in its own process, same client, same
/// run; and Go's `net/http` when a Go toolchain is installed (`make bench` installs one).
struct HTTPBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http",
        abstract: "HTTP: GET /healthz round trip on one keep-alive connection, and requests/s under 64 connections (wrk)."
    )

    @Option(help: "Round trips per server per round.")
    var requests = 20_000

    @Option(help: "Rounds (servers alternate within each; ratios are medians of per-round ratios).")
    var rounds = 5

    @Option(help: "Seconds of wrk load per server per round.")
    var duration = 3

    @Option(help: "Concurrent keep-alive connections under load.")
    var connections = 64

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?

    func run() async throws {
        let binary = try Bench.agentBinary(agent)
        print("agent-bench http: \(Bench.relative(binary))")
        let agentPort = Bench.freePort()
        let agentPID = ProcessBenchmarks().launch(binary, port: agentPort)
        defer { ProcessBenchmarks().stop(agentPID) }
        guard ProcessBenchmarks().connectWhenHealthy(port: agentPort) != nil else { throw ValidationError("agent did not start") }

        // The baseline answers exactly the bytes the agent answers (its Date header aside,
        // which both keep current): the same status line, header fields and body.
        guard let sample = BlockingHTTP(port: agentPort)?.rawResponse("/healthz") else { throw ValidationError("no /healthz answer") }
        let nioPort = Bench.freePort()
        let nioPID = Bench.spawn([Bench.selfExecutable(), "nio-http-server", "--port", "\(nioPort)", "--head", sample.head, "--body", sample.body])
        defer { kill(nioPID, SIGKILL); _ = Bench.wait(nioPID) }
        guard ProcessBenchmarks().connectWhenHealthy(port: nioPort) != nil else { throw ValidationError("baseline server did not start") }
        let hbPort = Bench.freePort()
        let hbPID = Bench.spawn([Bench.selfExecutable(), "hummingbird-http-server", "--port", "\(hbPort)", "--body", sample.body])
        defer { kill(hbPID, SIGKILL); _ = Bench.wait(hbPID) }
        guard ProcessBenchmarks().connectWhenHealthy(port: hbPort) != nil else { throw ValidationError("Hummingbird server did not start") }
        let go = GoHealthz.start()
        defer { go?.stop() }
        // A route with a handler (`GET /api/v0/processes/status`: the chat middleware, a task
        // on the loop, a JSON answer from memory) beside bare SwiftNIO answering its bytes:
        // `/healthz` alone is a constant answer, written with no request value.
        guard let routedSample = BlockingHTTP(port: agentPort)?.rawResponse(Self.routedPath) else {
            throw ValidationError("no \(Self.routedPath) answer")
        }
        let nioRoutedPort = Bench.freePort()
        let nioRoutedPID = Bench.spawn([
            Bench.selfExecutable(), "nio-http-server", "--port", "\(nioRoutedPort)", "--head", routedSample.head, "--body", routedSample.body,
        ])
        defer { kill(nioRoutedPID, SIGKILL); _ = Bench.wait(nioRoutedPID) }
        guard ProcessBenchmarks().connectWhenHealthy(port: nioRoutedPort) != nil else { throw ValidationError("baseline server did not start") }
        let routedServers: [(name: String, port: Int, pid: pid_t)] = [("agent", agentPort, agentPID), ("nio", nioRoutedPort, nioRoutedPID)]
        var routedCPU: [String: [Double]] = [:]

        var servers: [(name: String, port: Int, pid: pid_t)] = [
            ("agent", agentPort, agentPID), ("nio", nioPort, nioPID), ("hummingbird", hbPort, hbPID),
        ]
        if let go { servers.append(("go", go.port, go.pid)) }
        var rtt: [String: [Double]] = [:]
        var rate: [String: [Double]] = [:]
        var cpu: [String: [Double]] = [:]
        var p99: [String: [Double]] = [:]
        let wrk = Bench.onPath("wrk")
        for _ in 0..<rounds {
            for server in servers {
                rtt[server.name, default: []].append(try roundTrip(port: server.port))
                if let wrk {
                    let measured = try load(wrk, port: server.port, pid: server.pid)
                    rate[server.name, default: []].append(measured.rate)
                    cpu[server.name, default: []].append(measured.cpuPerRequest)
                    p99[server.name, default: []].append(measured.p99)
                }
            }
            if let wrk {
                for server in routedServers {
                    routedCPU[server.name, default: []].append(try load(wrk, port: server.port, pid: server.pid, path: Self.routedPath).cpuPerRequest)
                }
            }
        }
        reportAgainstBaselines(
            "GET /healthz round trip (median)", rtt, format: Bench.format,
            nioGoal: ("<= 1.1x bare SwiftNIO", { $0 <= 1.1 }), goGoal: ("<= 1.0x Go net/http", { $0 <= 1.0 }))
        await jsonEncoding()
        await RouteDispatchBenchmark.run()
        guard wrk != nil else {
            print("skip requests/s under load: wrk is not installed (make bench installs it)")
            return
        }
        reportAgainstBaselines(
            "requests/s, \(connections) connections", rate, format: { String(format: "%.0f/s", $0) },
            nioGoal: (">= 0.95x bare SwiftNIO", { $0 >= 0.95 }), goGoal: (">= 1.0x Go net/http", { $0 >= 1.0 }))
        reportAgainstBaselines(
            "server CPU per request under load", cpu, format: { String(format: "%.1f µs", $0 / 1000) },
            nioGoal: ("<= 1.15x bare SwiftNIO", { $0 <= 1.15 }), goGoal: ("reported", { _ in true }))
        reportAgainstBaselines(
            "p99 latency under load", p99, format: Bench.format,
            nioGoal: ("reported", { _ in true }), goGoal: ("reported", { _ in true }))
        reportAgainstBaselines(
            "  … a route with a handler (CPU per request)", routedCPU, format: { String(format: "%.1f µs", $0 / 1000) },
            nioGoal: ("reported (bare SwiftNIO answering its bytes)", { _ in true }), goGoal: ("reported", { _ in true }))
    }

    /// The route with a handler the benchmark also loads.
    static let routedPath = "/api/v0/processes/status"

    /// One measure of the agent against each baseline server: bare SwiftNIO (the goal's),
    /// bare Hummingbird (information) and Go when it ran. Each ratio is the median of
    /// per-round ratios: the servers of one round run seconds apart, and this host's speed
    /// drifts more than that between rounds.
    func reportAgainstBaselines(
        _ name: String, _ samples: [String: [Double]], format: (Double) -> String,
        nioGoal: (text: String, met: (Double) -> Bool), goGoal: (text: String, met: (Double) -> Bool)
    ) {
        let agentSamples = samples["agent"]!
        let agent = Bench.median(agentSamples)
        let baselines: [(server: String, label: String, goal: (text: String, met: (Double) -> Bool))] = [
            ("nio", name, nioGoal),
            ("hummingbird", "  against bare Hummingbird", ("(information: same framework, no middleware)", { _ in true })),
            ("go", "  against Go net/http", goGoal),
        ]
        for baseline in baselines {
            guard let other = samples[baseline.server] else { continue }
            let ratio = Bench.median(zip(agentSamples, other).map { $0 / $1 })
            report(
                baseline.label, value: format(agent), baseline: format(Bench.median(other)),
                ratio: ratio, goal: baseline.goal.text, met: baseline.goal.met(ratio))
        }
    }

    /// A process output answer (the shape of `GET /output`), encoded by the agent's encoder
    /// and by Foundation's `JSONEncoder` with the same options; medians of 5 rounds.
    func jsonEncoding() async {
        struct Output: Encodable {
            var output = String(repeating: "line of output\n", count: 8)
            var running = false
            var exitCode: Int? = 0
            var truncated: Bool? = nil
            var id = "5abf8495-777c-408e-80dc-64929f78a165"
            enum CodingKeys: String, CodingKey { case output, running, exitCode = "exit_code", truncated, id }
        }
        let value = Output()
        let foundation = JSONEncoder()
        foundation.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let compact = CompactJSONEncoder()
        precondition((try? compact.encode(value)) == (try? foundation.encode(value)).map(Array.init), "encoders disagree")
        var sink = 0
        let (oursMedian, theirsMedian) = await Bench.alternate(
            count: 20_000, { sink &+= (try? compact.encode(value))?.count ?? 0 }, { sink &+= (try? foundation.encode(value))?.count ?? 0 })
        precondition(sink > 0)
        report(
            "JSON answer encoded (GET /output's shape)", value: Bench.format(oursMedian), baseline: Bench.format(theirsMedian),
            ratio: oursMedian / theirsMedian, goal: "(information: Foundation JSONEncoder, same options)", met: true)
    }

    /// Median round trip of `requests` sequential GETs on one keep-alive connection.
    func roundTrip(port: Int) throws -> Double {
        guard let client = RawHTTPClient(port: port) else { throw ValidationError("cannot connect to \(port)") }
        for _ in 0..<min(1000, requests) { guard client.get() else { throw ValidationError("request failed on \(port)") } }
        var samples: [Double] = []
        samples.reserveCapacity(requests)
        for _ in 0..<requests {
            let t0 = Bench.now()
            guard client.get() else { throw ValidationError("request failed on \(port)") }
            samples.append(Double(Bench.now() - t0))
        }
        return Bench.median(samples)
    }

    /// What `wrk` measures against `port` served by `server`: requests per second, the
    /// server's CPU time per request (ns, from /proc) and wrk's p99 latency (ns).
    func load(_ wrk: String, port: Int, pid server: pid_t, path: String = "/healthz") throws -> (rate: Double, cpuPerRequest: Double, p99: Double) {
        let output = NSTemporaryDirectory() + "agent-bench-wrk-\(port).txt"
        let cpuBefore = Bench.cpuSeconds(server)
        let pid = Bench.spawn(
            [wrk, "-t2", "-c\(connections)", "-d\(duration)s", "--latency", "http://127.0.0.1:\(port)\(path)"], stdoutPath: output)
        _ = Bench.wait(pid)
        let cpu = Bench.cpuSeconds(server) - cpuBefore
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: output)
        var rate: Double?
        var requests: Double?
        var p99: Double?
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            if line.hasPrefix("Requests/sec:") {
                rate = Double(line.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces))
            } else if words.count >= 2, words[1] == "requests", let count = Double(words[0]) {
                requests = count
            } else if words.count == 2, words[0] == "99%" {
                p99 = Self.wrkDuration(words[1])
            }
        }
        guard let rate, let requests, requests > 0 else { throw ValidationError("wrk printed no rate:\n\(text)") }
        return (rate, cpu * 1e9 / requests, p99 ?? 0)
    }

    /// A wrk latency (`812.00us`, `1.23ms`, `2.00s`) in nanoseconds.
    static func wrkDuration(_ text: Substring) -> Double? {
        for (suffix, scale) in [("us", 1e3), ("ms", 1e6), ("s", 1e9)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return nil
    }
}

extension Bench {
    /// This executable's own path (to start a helper server as a child).
    static func selfExecutable() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }
}

extension BlockingHTTP {
    /// One GET's response split into its head lines (status line and fields, without Date)
    /// and body, for the baseline server to repeat.
    func rawResponse(_ path: String) -> (head: String, body: String)? {
        guard let (status, body) = request("GET", path), status == 200 else { return nil }
        return (lastHead.filter { !$0.lowercased().hasPrefix("date:") }.joined(separator: "\n"), String(decoding: body, as: UTF8.self))
    }
}

/// A lean blocking keep-alive client: a fixed request, and a response read to the end of
/// its `Content-Length` body, so that its own cost is small beside the server's.
final class RawHTTPClient {
    private let fd: Int32
    private let request = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    private var buffer = [UInt8](repeating: 0, count: 16384)

    init?(port: Int) {
        guard let fd = Bench.connect(port: port, noDelay: true) else { return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    /// One request and its whole response; false on a transport or framing error.
    func get() -> Bool {
        guard Bench.sendAll(fd, request) else { return false }
        var filled = 0
        var expected = Int.max
        // At most 64 reads: a response is a few hundred bytes.
        for _ in 0..<64 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + filled, $0.count - filled, 0) }
            if n <= 0 { return false }
            filled += n
            if expected == Int.max, let length = Self.responseLength(buffer, filled) { expected = length }
            if filled >= expected { return filled == expected }
            if filled == buffer.count { return false }
        }
        return false
    }

    /// Head plus `Content-Length` once the head is complete.
    static func responseLength(_ bytes: [UInt8], _ count: Int) -> Int? {
        parseHead(bytes, count).map { $0.end + $0.length }
    }

    /// Where the head ends and the body's `Content-Length`, once the head is complete
    /// (bytes only: the client's own cost is part of every round trip it measures).
    static func parseHead(_ bytes: [UInt8], _ count: Int) -> (end: Int, length: Int)? {
        guard count >= 4 else { return nil }
        let name = Array("content-length:".utf8)
        var lineStart = 0
        var length = 0
        for end in 1..<count where bytes[end] == 10 && bytes[end - 1] == 13 {
            if end == lineStart + 1 { return (end + 1, length) }
            if end - lineStart > name.count, zip(name, bytes[lineStart...]).allSatisfy({ $0 == ($1 | 0x20) || $0 == $1 }) {
                var value = 0
                for byte in bytes[(lineStart + name.count)..<(end - 1)] where byte >= 48 && byte <= 57 { value = value * 10 + Int(byte - 48) }
                length = value
            }
            lineStart = end + 1
        }
        return nil
    }
}

/// `agent-bench nio-http-server`: the baseline, a bare SwiftNIO HTTP/1.1 server on the
/// default event loop group (as the agent's), answering every request with fixed bytes
/// and a current Date header. Started as a child of `agent-bench http`.
struct NIOHTTPServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "nio-http-server", shouldDisplay: false)

    @Option var port: Int
    @Option(help: "Status line and header fields, one per line.") var head: String
    @Option var body: String

    func run() throws {
        let lines = head.split(separator: "\n").map(String.init)
        var fields = HTTPHeaders()
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields.add(name: String(line[..<colon]), value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let answer = FixedAnswer(fields: fields, body: ByteBuffer(string: body))
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(FixedAnswerHandler(answer: answer))
                }
            }
            .bind(host: "127.0.0.1", port: port).wait()
        try channel.closeFuture.wait()
    }
}

/// `agent-bench hummingbird-http-server`: Hummingbird with one route and no middleware,
/// answering /healthz with the agent's body: what the framework itself costs.
struct HummingbirdHTTPServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "hummingbird-http-server", shouldDisplay: false)

    @Option var port: Int
    @Option var body: String

    func run() async throws {
        let router = Router()
        let bytes = ByteBuffer(string: body)
        router.get("/healthz") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json; charset=utf-8", .contentLength: String(bytes.readableBytes)],
                body: .init(byteBuffer: bytes))
        }
        var logger = Logger(label: "hummingbird-http-server")
        logger.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "workspace-agent"),
            logger: logger)
        try await app.runService()
    }
}

struct FixedAnswer: Sendable {
    let fields: HTTPHeaders
    let body: ByteBuffer
}

/// Answers each request head with the fixed answer once its end arrives.
final class FixedAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let answer: FixedAnswer
    private var date = HTTPDate()
    init(answer: FixedAnswer) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var fields = answer.fields
        fields.replaceOrAdd(name: "Date", value: date.current())
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(answer.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// An RFC 9110 date, recomputed at most once a second (per connection).
struct HTTPDate {
    private var second = 0
    private var text = ""

    mutating func current() -> String {
        var t = time(nil)
        if t == second { return text }
        second = t
        var parts = tm()
        gmtime_r(&t, &parts)
        var bytes = [Int8](repeating: 0, count: 40)
        let n = strftime(&bytes, bytes.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        text = String(decoding: bytes[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text
    }
}

/// A Go `net/http` server answering /healthz like the agent, built from
/// `bench/go-healthz` when `go` is on PATH (the reference agent's HTTP stack).
struct GoHealthz {
    let pid: pid_t
    let port: Int

    static func start() -> GoHealthz? {
        guard let go = Bench.onPath("go") else {
            print("skip Go net/http comparison: go is not installed (make bench installs golang-go)")
            return nil
        }
        let source = FileManager.default.currentDirectoryPath + "/bench/go-healthz/main.go"
        guard FileManager.default.fileExists(atPath: source) else {
            print("skip Go net/http comparison: bench/go-healthz/main.go not found (run from the repository)")
            return nil
        }
        let output = NSTemporaryDirectory() + "agent-bench-go-healthz"
        let log = NSTemporaryDirectory() + "agent-bench-go-build.log"
        setenv("GOCACHE", NSTemporaryDirectory() + "agent-bench-gocache", 0)
        let build = Bench.wait(Bench.spawn([go, "build", "-o", output, source], stdoutPath: log))
        guard build == 0 else {
            print("skip Go net/http comparison: go build failed (\(Bench.relative(log)))")
            return nil
        }
        let port = Bench.freePort()
        let pid = Bench.spawn([output, "127.0.0.1:\(port)"])
        guard ProcessBenchmarks().connectWhenHealthy(port: port) != nil else {
            kill(pid, SIGKILL)
            _ = Bench.wait(pid)
            return nil
        }
        return GoHealthz(pid: pid, port: port)
    }

    func stop() {
        kill(pid, SIGKILL)
        _ = Bench.wait(pid)
    }
}
