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

/// `agent-bench tailnet-direct`: the agent over a direct UDP path against a wireguard-go ⇄
/// wireguard-go pair on the same namespaces and the same link, and against the agent over
/// DERP, in one run. The agent runs in namespace W (its relay and control plane reached
/// through a loopback bridge), wireguard-go A in namespace P with the disco speaker of the
/// tests in front of it (`DirectPeer`), linked to W by a veth pair; the pair's other side is
/// wireguard-go B in W on the same link. A second peer, P2 on a second link, never answers
/// pings, so the agent reaches it over DERP only. The pair's datagrams pass through the same
/// kind of user-space hop in P as the agent's (the speaker's code, its path fixed), so the
/// ratio compares the agent with wireguard-go, not the hop with none. Measured from P (and P2): HTTP round trips
/// to port 4 (fresh connections), bulk each way to a forwarded port, CPU per MiB of the agent
/// and of wireguard-go B, time from first contact to the direct path, idle CPU. Root only.
struct TailnetDirectBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tailnet-direct",
        abstract: "Direct UDP path: agent ⇄ wireguard-go against wireguard-go ⇄ wireguard-go and against DERP (root)."
    )

    @Option(help: "Path of the workspace-agent binary (default: next to agent-bench).")
    var agent: String?
    @Option(help: "Round trips per side per round.") var requests = 60
    @Option(help: "Rounds of round trips (medians).") var rounds = 5
    @Option(help: "MiB per bulk transfer.") var mebibytes = 64
    @Option(help: "Bulk rounds (each direction, each side; medians).") var bulkRounds = 2

    static let peerAddress = "fd7a:115c:a1e0::c0"
    static let pairAddress = "fd7a:115c:a1e0::c2"
    static let relayedAddress = "fd7a:115c:a1e0::c4"
    static let agentPort: UInt16 = 41641

    func run() async throws {
        for tool in ["/usr/bin/wireguard-go", "/usr/bin/wg", "/usr/sbin/ip", "/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/python3"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            throw ValidationError("\(tool) is missing (Debian: wireguard-go, wireguard-tools, iproute2, util-linux, python3)")
        }
        guard getuid() == 0 else { throw ValidationError("agent-bench tailnet-direct must run as root (network namespaces, TUN)") }
        let binary = try Bench.agentBinary(agent)
        guard let w = BenchNamespace.make(), let p = BenchNamespace.make(), let p2 = BenchNamespace.make() else {
            throw BenchFailure("`unshare -n` gave no private network namespace")
        }
        defer { for namespace in [w, p, p2] { namespace.stop() } }
        for (namespace, command) in [
            (w, ["ip", "link", "set", "lo", "up"]), (p, ["ip", "link", "set", "lo", "up"]), (p2, ["ip", "link", "set", "lo", "up"]),
            (w, ["ip", "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", "\(p.holder)"]),
            (w, ["ip", "link", "add", "vc", "type", "veth", "peer", "name", "vd", "netns", "\(p2.holder)"]),
            (w, ["ip", "addr", "add", "10.99.0.1/24", "dev", "va"]), (w, ["ip", "link", "set", "va", "up"]),
            (w, ["ip", "addr", "add", "10.99.1.1/24", "dev", "vc"]), (w, ["ip", "link", "set", "vc", "up"]),
            (p, ["ip", "addr", "add", "10.99.0.2/24", "dev", "vb"]), (p, ["ip", "link", "set", "vb", "up"]),
            (p2, ["ip", "addr", "add", "10.99.1.2/24", "dev", "vd"]), (p2, ["ip", "link", "set", "vd", "up"]),
        ] {
            let outcome = namespace.run(["/usr/sbin/" + command[0]] + command.dropFirst())
            guard outcome.status == 0 else { throw BenchFailure("\(command.joined(separator: " ")): \(outcome.output)") }
        }

        let relay = DERPRelayDouble()
        try await relay.start()
        let agentID = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let agentAddress = TailnetBenchmarks.primaryAddress(agentID: agentID)
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.agentID = Data(agentID)
        manifest.derpMap = TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port)
        let double = ControlPlaneDouble(manifest: manifest)
        let coordinator = TailnetCoordinatorDouble(derpMap: TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port))
        coordinator.install(on: double)
        let directory = NSTemporaryDirectory() + "agent-bench-tailnet-direct-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tokenFile = try BoundaryBenchmarks.tokenFile(double.token, in: directory)
        let settings = TailnetBenchmarks.BenchSettings(rounds: rounds, requests: requests, bytes: mebibytes << 20, bulkRounds: bulkRounds)
        let failure = Mutex<String?>(nil)
        try await double.run { url in
            guard let doublePort = url.split(separator: ":").last.flatMap({ Int($0.filter(\.isNumber)) }) else { return }
            let bridge = Bench.spawn(
                ["/usr/bin/python3", "-c", NamespaceBridge.script, w.path, "\(relay.port)", "\(doublePort)"],
                stdoutPath: directory + "/bridge.out")
            defer {
                kill(bridge, SIGKILL)
                _ = Bench.wait(bridge)
            }
            // Bounded: 10 s for the bridge to listen.
            for _ in 0..<1000 where !((try? String(contentsOfFile: directory + "/bridge.out", encoding: .utf8)) ?? "").contains("ready") {
                usleep(10_000)
            }
            let logPath = directory + "/agent.log"
            let pid = Bench.spawn(
                [
                    "/usr/bin/nsenter", "--net=\(w.path)", binary, "--http-address", "127.0.0.1:0", "--state-dir", directory + "/state",
                    "--log-level", "warning", "--prometheus-address", "", "--socket-server-enabled", "false", "--agent-url", url,
                    "--agent-token-file", tokenFile, "--boundary-log-proxy-socket-path", directory + "/boundary.sock",
                    "--tailnet-listen-port", "\(Self.agentPort)",
                ],
                stdoutPath: logPath)
            defer {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
            }
            do {
                try await Self.measure(settings, agent: pid, agentAddress: agentAddress, w: w, p: p, p2: p2, relay: relay, coordinator: coordinator)
            } catch {
                failure.withLock { $0 = "\(error); agent log: \(Bench.relative(logPath))" }
                _ = try? FileManager.default.copyItem(atPath: logPath, toPath: NSTemporaryDirectory() + "agent-bench-tailnet-direct-agent.log")
            }
        }
        await relay.stop()
        if let failure = failure.withLock({ $0 }) { throw BenchFailure(failure) }
    }

    /// A peer of the agent: wireguard-go in `namespace` behind a `DirectPeer` on `lan`.
    struct Peer {
        let key: WireGuardPrivateKey
        let speaker: DirectPeer
        let wireGuard: pid_t
    }

    static func startPeer(
        in namespace: BenchNamespace, interface: String, address: String, lan: String, answersPings: Bool, agentKey: [UInt8],
        agentDisco: X25519PublicKey, agentAddress: String, extraPeers: [(key: [UInt8], address: String, endpoint: String)], relay: DERPRelayDouble
    ) throws -> Peer {
        let key = WireGuardPrivateKey.generate()
        guard let loopback = TailnetBench.inNamespace(namespace.path, { UdpSocketMaker.bound("127.0.0.1", 0) }),
            let lanSocket = TailnetBench.inNamespace(namespace.path, { UdpSocketMaker.bound(lan, 41642) })
        else { throw BenchFailure("no UDP socket in a namespace") }
        let pid = try namespace.wireGuard(
            interface: interface, privateKey: key.raw.bytes, address: address,
            peers: [(agentKey, agentAddress, "127.0.0.1:\(loopback.port)")] + extraPeers)
        let speaker = DirectPeer(
            loopback: loopback.fd, lan: lanSocket.fd, wireguardPort: TailnetBench.wireGuardPort,
            agentKey: X25519PublicKey(agentKey)!, agentDisco: agentDisco, answersPings: answersPings)
        speaker.start(key: X25519PrivateKey(key.raw.bytes)!, relay: relay)
        return Peer(key: key, speaker: speaker, wireGuard: pid)
    }

    static func node(_ key: WireGuardPrivateKey, disco: X25519PublicKey, address: String, endpoint: String) -> Coder_Tailnet_V2_Node {
        var node = Coder_Tailnet_V2_Node()
        node.id = Int64.random(in: 1...Int64.max)
        node.key = Data(Array("np".utf8) + key.publicKey.bytes)
        node.disco = Disco.keyText(disco)
        node.preferredDerp = 1
        node.addresses = ["\(address)/128"]
        node.allowedIps = node.addresses
        node.endpoints = [endpoint]
        return node
    }

    static func measure(
        _ settings: TailnetBenchmarks.BenchSettings, agent: pid_t, agentAddress: String, w: BenchNamespace, p: BenchNamespace, p2: BenchNamespace,
        relay: DERPRelayDouble, coordinator: TailnetCoordinatorDouble
    ) async throws {
        var agentNode: Coder_Tailnet_V2_Node?
        // Bounded: 60 s for a node with a home region and the LAN endpoint.
        for _ in 0..<600 {
            if let node = coordinator.agentNode, node.preferredDerp == 1, node.endpoints.contains("10.99.0.1:\(agentPort)") {
                agentNode = node
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard let agentNode, let agentDisco = Disco.key(fromText: agentNode.disco) else {
            throw BenchFailure("the agent announced no node with its LAN endpoint in 60 s")
        }
        let agentKey = Array(agentNode.key.dropFirst(2))
        let suffix = "\(getpid() % 10_000)"
        // The pair: wireguard-go B in W on 10.99.0.1:51821, A's second peer.
        // The pair's packets take the same hop in P as the agent's (a forwarder of the same
        // code as the speaker, its path fixed): A → forwarder → B.
        let pairKey = WireGuardPrivateKey.generate()
        guard let pairLoopback = TailnetBench.inNamespace(p.path, { UdpSocketMaker.bound("127.0.0.1", 0) }),
            let pairLAN = TailnetBench.inNamespace(p.path, { UdpSocketMaker.bound("10.99.0.2", 41643) })
        else { throw BenchFailure("no UDP socket in a namespace") }
        let forwarder = DirectPeer(
            loopback: pairLoopback.fd, lan: pairLAN.fd, wireguardPort: TailnetBench.wireGuardPort, agentKey: X25519PublicKey(pairKey.publicKey.bytes)!,
            agentDisco: X25519PrivateKey.generate().publicKey, answersPings: false, fixedEndpoint: DiscoEndpoint("10.99.0.1:51821"))
        forwarder.start(key: X25519PrivateKey.generate(), relay: relay)
        let peer = try startPeer(
            in: p, interface: "wgda\(suffix)", address: peerAddress, lan: "10.99.0.2", answersPings: true, agentKey: agentKey, agentDisco: agentDisco,
            agentAddress: agentAddress, extraPeers: [(pairKey.publicKey.bytes, pairAddress, "127.0.0.1:\(pairLoopback.port)")], relay: relay)
        let relayed = try startPeer(
            in: p2, interface: "wgdc\(suffix)", address: relayedAddress, lan: "10.99.1.2", answersPings: false, agentKey: agentKey,
            agentDisco: agentDisco, agentAddress: agentAddress, extraPeers: [], relay: relay)
        let pair = try w.wireGuard(
            interface: "wgdb\(suffix)", privateKey: pairKey.raw.bytes, address: pairAddress,
            peers: [(peer.key.publicKey.bytes, peerAddress, "10.99.0.2:41643")], listenPort: 51821)
        defer {
            Task { await forwarder.stop() }
            for pid in [peer.wireGuard, relayed.wireGuard, pair] {
                kill(pid, SIGTERM)
                _ = Bench.wait(pid)
            }
        }
        let bulkPort = Bench.freePort()
        guard let bulk = BenchSocketServer(kind: .bulk, namespace: w.path, port: bulkPort),
            let http = BenchSocketServer(kind: .http, namespace: w.path, port: TailnetBenchmarks.baselineHTTPPort)
        else { throw BenchFailure("a benchmark server did not listen") }
        defer {
            bulk.stop()
            http.stop()
        }

        // First contact: the peer is introduced and asks for healthz at once; the clock runs
        // until the agent's status (through the tunnel) says the path is direct and trusted.
        coordinator.setPeer(id: [UInt8](repeating: 0xc0, count: 16), node: node(peer.key, disco: peer.speaker.disco.publicKey, address: peerAddress, endpoint: "10.99.0.2:41642"))
        coordinator.setPeer(id: [UInt8](repeating: 0xc4, count: 16), node: node(relayed.key, disco: relayed.speaker.disco.publicKey, address: relayedAddress, endpoint: "10.99.1.2:41642"))
        // The agent has taken both peers before the first packet (else the first handshake is
        // dropped and wireguard-go tries again 5 s later).
        for _ in 0..<300 {
            if coordinator.recorded.withLock({ $0.acks.contains([UInt8](repeating: 0xc0, count: 16)) && $0.acks.contains([UInt8](repeating: 0xc4, count: 16)) }) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let (contact, direct) = await onThread { () -> (Double?, Double?) in
            TailnetBench.inNamespace(p.path) { () -> (Double?, Double?) in
                // Bounded: 60 s for the tunnel, then 30 s for the direct path.
                var contact: UInt64?
                for _ in 0..<600 {
                    let attempt = Bench.now()
                    if TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz") != nil {
                        contact = attempt
                        break
                    }
                    usleep(100_000)
                }
                guard let contact else { return (nil, nil) }
                for _ in 0..<3000 {
                    if Self.isDirect(agentAddress: agentAddress) { return (Double(contact), Double(Bench.now() - contact)) }
                    usleep(10_000)
                }
                return (Double(contact), nil)
            } ?? (nil, nil)
        }
        guard contact != nil else { throw BenchFailure("healthz never answered through the tunnel") }
        guard let direct else { throw BenchFailure("the agent's path to the peer never became direct in 30 s") }
        // The relayed peer's tunnel must work too.
        let relayedReached = await onThread {
            TailnetBench.inNamespace(p2.path) { () -> Bool in
                for _ in 0..<600 where TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz") == nil { usleep(100_000) }
                return TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz") != nil
            } ?? false
        }
        guard relayedReached else { throw BenchFailure("healthz never answered the relayed peer") }

        let figures = await onThread { () -> DirectFigures in
            var f = DirectFigures()
            for _ in 0..<settings.rounds {
                f.agentTrips += TailnetBench.inNamespace(p.path) { (0..<settings.requests).compactMap { _ in TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz") } } ?? []
                f.pairTrips += TailnetBench.inNamespace(p.path) { (0..<settings.requests).compactMap { _ in TailnetBench.roundTrip(address: pairAddress, port: TailnetBenchmarks.baselineHTTPPort, path: "/") } } ?? []
                f.relayedTrips += TailnetBench.inNamespace(p2.path) { (0..<settings.requests).compactMap { _ in TailnetBench.roundTrip(address: agentAddress, port: 4, path: "/healthz") } } ?? []
            }
            let agentCPUStart = Bench.cpuSeconds(agent)
            let pairCPUStart = Bench.cpuSeconds(pair)
            for _ in 0..<settings.bulkRounds {
                let agentCPU0 = Bench.cpuSeconds(agent)
                if let t = TailnetBench.inNamespace(p.path, { TailnetBench.upload(address: agentAddress, port: bulkPort, bytes: settings.bytes) }) { f.agentUp.append(t) }
                if let t = TailnetBench.inNamespace(p.path, { TailnetBench.download(address: agentAddress, port: bulkPort, bytes: settings.bytes) }) { f.agentDown.append(t) }
                f.agentCPU += Bench.cpuSeconds(agent) - agentCPU0
                let pairCPU0 = Bench.cpuSeconds(pair)
                if let t = TailnetBench.inNamespace(p.path, { TailnetBench.upload(address: pairAddress, port: bulkPort, bytes: settings.bytes) }) { f.pairUp.append(t) }
                if let t = TailnetBench.inNamespace(p.path, { TailnetBench.download(address: pairAddress, port: bulkPort, bytes: settings.bytes) }) { f.pairDown.append(t) }
                f.pairCPU += Bench.cpuSeconds(pair) - pairCPU0
                if let t = TailnetBench.inNamespace(p2.path, { TailnetBench.upload(address: agentAddress, port: bulkPort, bytes: settings.bytes) }) { f.relayedUp.append(t) }
                if let t = TailnetBench.inNamespace(p2.path, { TailnetBench.download(address: agentAddress, port: bulkPort, bytes: settings.bytes) }) { f.relayedDown.append(t) }
            }
            _ = (agentCPUStart, pairCPUStart)
            f.mebibytes = Double(2 * settings.bulkRounds * settings.bytes) / Double(1 << 20)
            // Idle: 10 s with both peers quiet (heartbeats run for 45 s after the last send).
            let idle0 = Bench.cpuSeconds(agent)
            sleep(10)
            f.idleCPU = (Bench.cpuSeconds(agent) - idle0) / 10
            return f
        }
        let bytesDirect = peer.speaker.counters
        print("agent-bench tailnet-direct: from namespace P over a veth link; the pair is wireguard-go ⇄ wireguard-go on the same link")
        let trip = Bench.median(figures.agentTrips)
        let pairTrip = Bench.median(figures.pairTrips)
        report(
            "HTTP round trip, direct (port 4)", value: Bench.format(trip), baseline: Bench.format(pairTrip) + " wg-go pair",
            ratio: trip / pairTrip, goal: "<= 1.1x", met: trip <= 1.1 * pairTrip)
        let rate = { (bytes: Int, ns: [Double]) -> Double in Double(bytes) / (Bench.median(ns) / 1e9) / Double(1 << 20) }
        let up = rate(settings.bytes, figures.agentUp), pairUp = rate(settings.bytes, figures.pairUp)
        report(
            "bulk up, direct", value: String(format: "%.1f MiB/s", up), baseline: String(format: "%.1f MiB/s wg-go pair", pairUp),
            ratio: up / pairUp, goal: ">= 0.9x", met: up >= 0.9 * pairUp)
        let down = rate(settings.bytes, figures.agentDown), pairDown = rate(settings.bytes, figures.pairDown)
        report(
            "bulk down, direct", value: String(format: "%.1f MiB/s", down), baseline: String(format: "%.1f MiB/s wg-go pair", pairDown),
            ratio: down / pairDown, goal: ">= 0.9x", met: down >= 0.9 * pairDown)
        let cpu = figures.agentCPU / figures.mebibytes * 1e6, pairCPU = figures.pairCPU / figures.mebibytes * 1e6
        report(
            "CPU per MiB, direct", value: String(format: "%.0f µs", cpu), baseline: String(format: "%.0f µs wireguard-go", pairCPU),
            ratio: cpu / pairCPU, goal: "<= 1.3x", met: cpu <= 1.3 * pairCPU)
        let relayedTrip = Bench.median(figures.relayedTrips)
        report(
            "HTTP round trip, direct vs DERP", value: Bench.format(trip), baseline: Bench.format(relayedTrip) + " DERP",
            ratio: trip / relayedTrip, goal: "(information)", met: true)
        let relayedDown = rate(settings.bytes, figures.relayedDown), relayedUp = rate(settings.bytes, figures.relayedUp)
        report(
            "bulk down, direct vs DERP", value: String(format: "%.1f MiB/s", down), baseline: String(format: "%.1f MiB/s DERP", relayedDown),
            ratio: down / relayedDown, goal: "(information)", met: true)
        report(
            "bulk up, direct vs DERP", value: String(format: "%.1f MiB/s", up), baseline: String(format: "%.1f MiB/s DERP", relayedUp),
            ratio: up / relayedUp, goal: "(information)", met: true)
        report(
            "first contact to direct path", value: Bench.format(direct), baseline: "1 s",
            ratio: direct / 1e9, goal: "<= first round + 1 s", met: direct <= 1e9)
        report(
            "idle CPU with a direct peer", value: String(format: "%.2f ms/s", figures.idleCPU * 1e3), baseline: "10 ms/s (1 % of a core)",
            ratio: figures.idleCPU / 0.01, goal: "<= heartbeat cost (1 %)", met: figures.idleCPU <= 0.01)
        print("  (the peer's speaker counted \(bytesDirect.udpIn >> 20) MiB in over UDP, \(bytesDirect.derpIn >> 20) MiB over DERP)")
    }

    /// The agent's status (through the tunnel, from the caller's namespace) says the first
    /// peer's path is direct and trusted.
    static func isDirect(agentAddress: String) -> Bool {
        guard let body = TailnetBench.get(address: agentAddress, port: 4, path: "/api/v0/tailnet") else { return false }
        return body.contains("\"path\":\"10.99.0.2:41642\"") && body.contains("\"direct_trusted\":true")
    }

    struct DirectFigures: Sendable {
        var agentTrips: [Double] = []
        var pairTrips: [Double] = []
        var relayedTrips: [Double] = []
        var agentUp: [Double] = []
        var agentDown: [Double] = []
        var pairUp: [Double] = []
        var pairDown: [Double] = []
        var relayedUp: [Double] = []
        var relayedDown: [Double] = []
        var agentCPU = 0.0
        var pairCPU = 0.0
        var mebibytes = 0.0
        var idleCPU = 0.0
    }
}

/// A UDP socket bound in the calling thread's namespace.
enum UdpSocketMaker {
    static func bound(_ host: String, _ port: UInt16) -> UdpSocket? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = port.bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else {
            close(fd)
            return nil
        }
        return UdpSocket(fd: fd, port: UInt16(bigEndian: address.sin_port))
    }
}
