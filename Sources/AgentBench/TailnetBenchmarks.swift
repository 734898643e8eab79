import AgentProto
import ArgumentParser
import ControlPlaneDouble
import DERP
import DERPRelayDouble
import Foundation
import Synchronization
import WireGuard

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench tailnet`: coderd's path to the agent against the path two
/// WireGuard peers get, through the same DERP relay (the relay double, in process, plain
/// HTTP on 127.0.0.1). Side A is Debian's wireguard-go in a private namespace N1, bridged to
/// the relay under its own key (what magicsock does). Target 1 is the release agent (its
/// peer set up through the coordinator double on the control-plane double); the baseline
/// is a second wireguard-go in namespace N2, bridged the same way, with the kernel's TCP
/// and a minimal socket HTTP server and bulk sink/source there. Measured from N1, in turn:
/// HTTP round trips (a fresh connection per request, as curl makes), bulk throughput each
/// way, the agent's CPU per MiB, and its RSS after the tunnel has been idle 5 s. Root only.
struct TailnetBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tailnet",
        abstract: "Tunnel round trip, throughput, CPU and idle RSS: wireguard-go ⇄ agent against wireguard-go ⇄ wireguard-go (root)."
    )

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Rounds of round trips (each side in turn; medians).") var rounds = 5
    @Option(help: "Round trips per side per round.") var requests = 60
    @Option(help: "MiB per bulk transfer.") var mebibytes = 64
    @Option(help: "Bulk rounds (each direction, each side in turn; medians).") var bulkRounds = 2

    static let sideAAddress = "fd7a:115c:a1e0::c0"
    static let sideBAddress = "fd7a:115c:a1e0::c2"
    static let peerID = [UInt8](repeating: 0xc0, count: 16)
    static let baselineHTTPPort = 8080

    func run() async throws {
        for tool in ["/usr/bin/wireguard-go", "/usr/bin/wg", "/usr/sbin/ip", "/usr/bin/unshare", "/usr/bin/nsenter"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw ValidationError("\(tool) is missing (Debian: wireguard-go, wireguard-tools, iproute2, util-linux)")
        }
        guard FileManager.default.fileExists(atPath: "/dev/net/tun") else { throw ValidationError("/dev/net/tun is missing") }
        guard getuid() == 0 else { throw ValidationError("agent-bench tailnet must run as root (network namespaces, TUN)") }
        let binary = try Bench.agentBinary(agent)
        let relay = DERPRelayDouble()
        try await relay.start()
        let agentID = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let agentAddress = Self.primaryAddress(agentID: agentID)
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.agentID = Data(agentID)
        manifest.derpMap = TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port)
        let double = ControlPlaneDouble(manifest: manifest)
        let coordinator = TailnetCoordinatorDouble(derpMap: TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port))
        coordinator.install(on: double)
        let directory = NSTemporaryDirectory() + "agent-bench-tailnet-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tokenFile = try BoundaryBenchmarks.tokenFile(double.token, in: directory)
        let settings = BenchSettings(rounds: rounds, requests: requests, bytes: mebibytes << 20, bulkRounds: bulkRounds)
        let failure = Mutex<String?>(nil)
        try await double.run { url in
            let httpPort = Bench.freePort()
            let logPath = directory + "/agent.log"
            let pid = Bench.spawn(
                [
                    binary, "--http-address", "127.0.0.1:\(httpPort)", "--state-dir", directory + "/state", "--log-level", "warning",
                    "--prometheus-address", "", "--socket-server-enabled", "false", "--agent-url", url, "--agent-token-file", tokenFile,
                    "--boundary-log-proxy-socket-path", directory + "/boundary.sock",
                ],
                stdoutPath: logPath)
            defer {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
            }
            do {
                try await Self.measure(settings, agent: pid, httpPort: httpPort, agentAddress: agentAddress, relay: relay, coordinator: coordinator)
            } catch {
                failure.withLock { $0 = "\(error); agent log: \(Bench.relative(logPath))" }
                _ = try? FileManager.default.copyItem(atPath: logPath, toPath: NSTemporaryDirectory() + "agent-bench-tailnet-agent.log")
            }
        }
        await relay.stop()
        if let failure = failure.withLock({ $0 }) { throw BenchFailure(failure) }
    }

    struct BenchSettings: Sendable {
        let rounds: Int
        let requests: Int
        let bytes: Int
        let bulkRounds: Int
    }

    static func measure(
        _ settings: BenchSettings, agent: pid_t, httpPort: Int, agentAddress: String, relay: DERPRelayDouble,
        coordinator: TailnetCoordinatorDouble
    ) async throws {
        // The agent connects to its home relay before it announces a node with it (60 s).
        var agentKeyBytes: [UInt8]?
        for _ in 0..<600 {
            if let node = coordinator.agentNode, node.preferredDerp == 1, node.key.count == 34 {
                agentKeyBytes = Array(node.key.dropFirst(2))
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard let agentKeyBytes, let agentKey = X25519PublicKey(agentKeyBytes) else { throw BenchFailure("the agent announced no node with a home region in 60 s") }

        guard let n1 = BenchNamespace.make(), let n2 = BenchNamespace.make() else { throw BenchFailure("`unshare -n` gave no private network namespace") }
        defer {
            n1.stop()
            n2.stop()
        }
        let keyA = WireGuardPrivateKey.generate()
        let keyB = WireGuardPrivateKey.generate()
        let derpA = X25519PrivateKey(keyA.raw.bytes)!
        let derpB = X25519PrivateKey(keyB.raw.bytes)!
        guard let bridgeA = RelayBridge(namespace: n1.path, key: derpA, peers: [agentKey, derpB.publicKey], relay: relay, lifetime: .seconds(600)),
            let bridgeB = RelayBridge(namespace: n2.path, key: derpB, peers: [derpA.publicKey], relay: relay, lifetime: .seconds(600))
        else { throw BenchFailure("no UDP socket in a namespace") }
        let suffix = "\(getpid() % 10_000)"
        var wireGuards: [pid_t] = []
        do {
            wireGuards.append(
                try n1.wireGuard(
                    interface: "wgba\(suffix)", privateKey: keyA.raw.bytes, address: sideAAddress,
                    peers: [(agentKeyBytes, agentAddress, bridgeA.ports[agentKey]!), (keyB.publicKey.bytes, sideBAddress, bridgeA.ports[derpB.publicKey]!)]))
            wireGuards.append(
                try n2.wireGuard(
                    interface: "wgbb\(suffix)", privateKey: keyB.raw.bytes, address: sideBAddress,
                    peers: [(keyA.publicKey.bytes, sideAAddress, bridgeB.ports[derpA.publicKey]!)]))
        } catch {
            for pid in wireGuards { kill(pid, SIGTERM); _ = Bench.wait(pid) }
            await bridgeA.stop()
            await bridgeB.stop()
            throw error
        }
        let pairPeer = wireGuards[1]
        // The agent's forwarded port: a sink/source on the workspace's loopback; the pair's
        // servers listen in N2 on the same port number and on 8080 for HTTP.
        let bulkPort = Bench.freePort()
        let workspaceBulk = BenchSocketServer(kind: .bulk, namespace: nil, port: bulkPort)
        // The pair's server on our loopback too: its side's added cost over its own server.
        let loopbackPort = Bench.freePort()
        let loopbackHTTP = BenchSocketServer(kind: .http, namespace: nil, port: loopbackPort)
        let pairBulk = BenchSocketServer(kind: .bulk, namespace: n2.path, port: bulkPort)
        let pairHTTP = BenchSocketServer(kind: .http, namespace: n2.path, port: baselineHTTPPort)
        defer {
            workspaceBulk?.stop()
            loopbackHTTP?.stop()
            pairBulk?.stop()
            pairHTTP?.stop()
        }
        do {
            guard workspaceBulk != nil, loopbackHTTP != nil, pairBulk != nil, pairHTTP != nil else { throw BenchFailure("a benchmark server did not listen") }
            var id = Coder_Tailnet_V2_Node()
            id.id = 42
            id.key = Data(Array("np".utf8) + keyA.publicKey.bytes)
            id.disco = "discokey:" + String(repeating: "5a", count: 32)
            id.preferredDerp = 1
            id.addresses = ["\(sideAAddress)/128"]
            id.allowedIps = id.addresses
            coordinator.setPeer(id: peerID, node: id)
            var acked = false
            for _ in 0..<300 {
                if coordinator.recorded.withLock({ $0.acks.contains(peerID) }) {
                    acked = true
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            guard acked else { throw BenchFailure("the agent did not acknowledge the peer in 30 s") }
            let results = await onThread {
                Self.runMeasurements(
                    settings, n1: n1.path, agent: agent, pairPeer: pairPeer, httpPort: httpPort, agentAddress: agentAddress, bulkPort: bulkPort,
                    loopbackPort: loopbackPort)
            }
            let figures = try results.get()
            Self.printFigures(figures, settings, relayPort: relay.port)
        } catch {
            for pid in wireGuards { kill(pid, SIGTERM); _ = Bench.wait(pid) }
            await bridgeA.stop()
            await bridgeB.stop()
            throw error
        }
        for pid in wireGuards { kill(pid, SIGTERM); _ = Bench.wait(pid) }
        await bridgeA.stop()
        await bridgeB.stop()
    }

    struct Figures: Sendable {
        var agentTrips: [Double] = []
        var pairTrips: [Double] = []
        var loopbackTrips: [Double] = []
        var serverLoopbackTrips: [Double] = []
        var agentUp: [Double] = []
        var pairUp: [Double] = []
        var agentDown: [Double] = []
        var pairDown: [Double] = []
        var agentCPU = 0.0
        var pairCPU = 0.0
        var bulkMiB = 0.0
        var agentRSS = 0
        var pairRSS = 0
        var firstRSS = 0
        var firstPairRSS = 0
        var agentAnon = 0
        var pairAnon = 0
    }

    /// The measurements, on a thread of their own that joins N1 (and our namespace again for
    /// the loopback baseline): sockets are made in the namespace of the thread that makes them.
    static func runMeasurements(
        _ settings: BenchSettings, n1: String, agent: pid_t, pairPeer: pid_t, httpPort: Int, agentAddress: String,
        bulkPort: Int, loopbackPort: Int
    ) -> Result<Figures, BenchFailure> {
        let ours = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)
        let theirs = open(n1, O_RDONLY | O_CLOEXEC)
        defer {
            close(ours)
            close(theirs)
        }
        guard ours >= 0, theirs >= 0, TailnetBench.enter(namespace: theirs) else { return .failure(BenchFailure("cannot join N1")) }
        // Warm-up: the first packets wait for WireGuard's handshakes (a retry takes 5 s): 60 s.
        for (name, address, port) in [("agent", agentAddress, 4), ("wireguard-go pair", sideBAddress, baselineHTTPPort)] {
            var reached = false
            for _ in 0..<60 {
                if TailnetBench.roundTrip(address: address, port: port, path: "/healthz") != nil {
                    reached = true
                    break
                }
                usleep(200_000)
            }
            guard reached else { return .failure(BenchFailure("no HTTP answer through the tunnel from the \(name) in 60 s")) }
        }
        var figures = Figures()
        for _ in 0..<20 {
            _ = TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz")
            _ = TailnetBench.roundTrip(address: sideBAddress, port: baselineHTTPPort, path: "/healthz")
        }
        for _ in 0..<settings.rounds {
            for _ in 0..<settings.requests {
                guard let ns = TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz") else { return .failure(BenchFailure("a round trip to the agent failed")) }
                figures.agentTrips.append(ns)
            }
            for _ in 0..<settings.requests {
                guard let ns = TailnetBench.roundTrip(address: sideBAddress, port: baselineHTTPPort, path: "/healthz") else { return .failure(BenchFailure("a round trip to the pair failed")) }
                figures.pairTrips.append(ns)
            }
            guard TailnetBench.enter(namespace: ours) else { return .failure(BenchFailure("cannot rejoin our namespace")) }
            for _ in 0..<settings.requests {
                guard let ns = TailnetBench.roundTrip(address: "127.0.0.1", port: httpPort, path: "/healthz") else { return .failure(BenchFailure("a loopback round trip failed")) }
                figures.loopbackTrips.append(ns)
            }
            for _ in 0..<settings.requests {
                guard let ns = TailnetBench.roundTrip(address: "127.0.0.1", port: loopbackPort, path: "/healthz") else { return .failure(BenchFailure("a loopback round trip to the pair's server failed")) }
                figures.serverLoopbackTrips.append(ns)
            }
            guard TailnetBench.enter(namespace: theirs) else { return .failure(BenchFailure("cannot join N1")) }
        }
        figures.firstRSS = Bench.rss(agent)
        figures.firstPairRSS = Bench.rss(pairPeer)
        let bytes = settings.bytes
        var agentCPU = 0.0
        var pairCPU = 0.0
        for _ in 0..<settings.bulkRounds {
            var before = Bench.cpuSeconds(agent)
            guard let up = TailnetBench.upload(address: agentAddress, port: bulkPort, bytes: bytes),
                let down = TailnetBench.download(address: agentAddress, port: bulkPort, bytes: bytes)
            else { return .failure(BenchFailure("a bulk transfer through the agent failed")) }
            agentCPU += Bench.cpuSeconds(agent) - before
            figures.agentUp.append(up)
            figures.agentDown.append(down)
            before = Bench.cpuSeconds(pairPeer)
            guard let pairUp = TailnetBench.upload(address: sideBAddress, port: bulkPort, bytes: bytes),
                let pairDown = TailnetBench.download(address: sideBAddress, port: bulkPort, bytes: bytes)
            else { return .failure(BenchFailure("a bulk transfer through the pair failed")) }
            pairCPU += Bench.cpuSeconds(pairPeer) - before
            figures.pairUp.append(pairUp)
            figures.pairDown.append(pairDown)
        }
        figures.bulkMiB = Double(2 * settings.bulkRounds * bytes) / 1_048_576
        figures.agentCPU = agentCPU
        figures.pairCPU = pairCPU
        // The tunnel up and idle for 5 s.
        sleep(5)
        figures.agentRSS = Bench.rss(agent)
        figures.pairRSS = Bench.rss(pairPeer)
        figures.agentAnon = Bench.rss(agent, field: "RssAnon")
        figures.pairAnon = Bench.rss(pairPeer, field: "RssAnon")
        return .success(figures)
    }

    static func printFigures(_ f: Figures, _ settings: BenchSettings, relayPort: Int) {
        let version = TailnetBench.run(["/usr/bin/wireguard-go", "--version"]).output.split(separator: "\n").first.map(String.init) ?? "wireguard-go"
        Swift.print("agent-bench tailnet: DERP relay double on 127.0.0.1:\(relayPort); \(version); MTU 1280 both sides")
        Swift.print("  \(settings.rounds) rounds of \(settings.requests) round trips per side (fresh connection each, medians); \(settings.bulkRounds) round(s) of \(settings.bytes >> 20) MiB each way per side")
        let agentMedian = Bench.median(f.agentTrips)
        let pairMedian = Bench.median(f.pairTrips)
        let loopMedian = Bench.median(f.loopbackTrips)
        report(
            "HTTP round trip via tunnel (median)", value: Bench.format(agentMedian), baseline: Bench.format(pairMedian),
            ratio: agentMedian / pairMedian, goal: "<= 1.2x the wireguard-go pair", met: agentMedian / pairMedian <= 1.2)
        let agentP90 = Bench.percentile(f.agentTrips, 0.9)
        let pairP90 = Bench.percentile(f.pairTrips, 0.9)
        report(
            "HTTP round trip via tunnel (p90)", value: Bench.format(agentP90), baseline: Bench.format(pairP90),
            ratio: agentP90 / pairP90, goal: "reported (pair's p90)", met: true)
        report(
            "  added over loopback /healthz", value: String(format: "%.0f µs", (agentMedian - loopMedian) / 1e3), baseline: Bench.format(loopMedian),
            ratio: agentMedian / loopMedian, goal: "reported (baseline: loopback)", met: true)
        let serverLoopMedian = Bench.median(f.serverLoopbackTrips)
        report(
            "  pair's added over its own loopback", value: String(format: "%.0f µs", (pairMedian - serverLoopMedian) / 1e3),
            baseline: Bench.format(serverLoopMedian), ratio: pairMedian / serverLoopMedian, goal: "reported (information)", met: true)
        let mib = Double(settings.bytes) / 1_048_576
        func rate(_ ns: [Double]) -> Double { mib / (Bench.median(ns) / 1e9) }
        let up = rate(f.agentUp), pairUp = rate(f.pairUp)
        report(
            "bulk to the workspace, \(settings.bytes >> 20) MiB", value: String(format: "%.1f MiB/s", up), baseline: String(format: "%.1f MiB/s", pairUp),
            ratio: up / pairUp, goal: ">= 0.8x the pair", met: up / pairUp >= 0.8)
        let down = rate(f.agentDown), pairDown = rate(f.pairDown)
        report(
            "bulk from the workspace, \(settings.bytes >> 20) MiB", value: String(format: "%.1f MiB/s", down), baseline: String(format: "%.1f MiB/s", pairDown),
            ratio: down / pairDown, goal: ">= 0.8x the pair", met: down / pairDown >= 0.8)
        let agentPerMiB = f.agentCPU / f.bulkMiB * 1e3
        let pairPerMiB = f.pairCPU / f.bulkMiB * 1e3
        report(
            "agent CPU per MiB (both ways)", value: String(format: "%.2f ms", agentPerMiB), baseline: String(format: "%.2f ms", pairPerMiB),
            ratio: pairPerMiB > 0 ? agentPerMiB / pairPerMiB : 0, goal: "reported (baseline: the far wireguard-go's)", met: true)
        report(
            "idle RSS, tunnel up 5 s idle", value: Bench.mib(f.agentRSS), baseline: Bench.mib(f.pairRSS),
            ratio: Double(f.agentRSS) / Double(max(1, f.pairRSS)), goal: "< 30 MiB (baseline: wireguard-go's RSS)", met: f.agentRSS < 30 << 20)
        report(
            "  of which private (RssAnon)", value: Bench.mib(f.agentAnon), baseline: Bench.mib(f.pairAnon),
            ratio: Double(f.agentAnon) / Double(max(1, f.pairAnon)), goal: "reported (information)", met: true)
        report(
            "  RSS after the round trips", value: Bench.mib(f.firstRSS), baseline: Bench.mib(f.firstPairRSS),
            ratio: Double(f.firstRSS) / Double(max(1, f.firstPairRSS)), goal: "reported (before the bulk transfers)", met: true)
    }

    /// The agent's primary tailnet address (the spec's derivation: fd7a:115c:a1e0: + id[6...]).
    static func primaryAddress(agentID: [UInt8]) -> String {
        let bytes: [UInt8] = [0xfd, 0x7a, 0x11, 0x5c, 0xa1, 0xe0] + agentID[6...]
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

}
