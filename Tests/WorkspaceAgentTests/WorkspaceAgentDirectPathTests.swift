import AgentProto
import AgentTestSupport
import ControlPlaneDouble
import DERP
import DERPRelayDouble
import Foundation
import Synchronization
import Testing
import WireGuard
#if canImport(Glibc)
import Glibc
#endif

/// Direct paths end to end, with real parts: the agent binary in a network namespace of its
/// own ("workspace"), linked by a veth pair to the peer's namespace, where Debian's
/// wireguard-go sits behind ``DirectPeer`` (disco written from the byte tables). The relay
/// and control-plane doubles run in the test on loopback and reach the workspace's loopback
/// through a bridge (a listening socket made inside the namespace, pumped to ours).
///
/// Not serialized: each test makes its own namespaces, relay, coordinator and agent, so they
/// run side by side (serialized, each test waited again behind the whole run's queue of test
/// cases and the suite was the last to end).
///
/// Skipped, with the reason, where they cannot run: not root, no `/dev/net/tun`, a tool
/// missing (`make test` installs them on Debian), or `unshare -n` refused (a container
/// without the privilege to make network namespaces).
@Suite(
    .timeLimit(.minutes(6)),
    .enabled(
        if: DirectPathPrerequisites.missing() == nil,
        "needs root, /dev/net/tun, wireguard-go, wg, ip, iptables, turnserver (coturn), ssh, curl, python3 and the right to make network namespaces"))
struct WorkspaceAgentDirectPathTests {
    static let agentLAN = "10.99.0.1"
    static let peerLAN = "10.99.0.2"
    static let agentPort: UInt16 = 41641
    static let peerPort: UInt16 = 41642
    static let peerID = [UInt8](repeating: 0xd1, count: 16)

    struct Topology: Sendable {
        let workspace: NetworkNamespace
        let peerNamespace: NetworkNamespace
        let relay: DERPRelayDouble
        let coordinator: TailnetCoordinatorDouble
        let agent: AgentDaemon
        let addresses: TailnetTestAddresses
        let peer: DirectPeer
        let agentNode: Coder_Tailnet_V2_Node

        func curl(_ arguments: [String], maxTime: Int = 20) async -> ChildProgram.Outcome {
            await peerNamespace.run(["curl", "-sS", "-g", "--max-time", "\(maxTime)"] + arguments)
        }

        func url(port: Int = 4, _ path: String) -> String { "http://[\(addresses.primaryText)]:\(port)\(path)" }

        /// The agent's view of the peer, read through the tunnel: its path and whether trusted.
        func peerPath() async -> (path: String, trusted: Bool)? {
            let status = await curl([url("/api/v0/tailnet")], maxTime: 8)
            guard let json = jsonObject(Array(status.stdout.utf8)), let peers = json["peers"] as? [[String: Any]],
                let first = peers.first, let path = first["path"] as? String
            else { return nil }
            return (path, first["direct_trusted"] as? Bool ?? false)
        }

        /// A UDP echo server on the workspace's 127.0.0.1 (Python), and from the peer's
        /// namespace `count` datagrams of `size` bytes to [agent]:port through the tunnel:
        /// how many came back intact.
        func udpEcho(size: Int = 1232, count: Int = 5) async -> Int {
            let port = 40000 + Int.random(in: 0..<9000)
            guard
                let server = workspace.start([
                    "python3", "-c",
                    """
                    import socket
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.bind(('127.0.0.1', \(port)))
                    print('ready', flush=True)
                    for _ in range(1000):
                        data, source = s.recvfrom(65536)
                        s.sendto(data, source)
                    """,
                ])
            else { return -1 }
            defer { server.kill() }
            guard await onThread({ server.readLine(limit: 16) }) == "ready" else { return -1 }
            let outcome = await peerNamespace.run([
                "python3", "-c",
                """
                import os, socket, time
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                good = 0
                for i in range(\(count)):
                    payload = os.urandom(\(size))
                    for attempt in range(5):
                        s.sendto(payload, ('\(addresses.primaryText)', \(port)))
                        # A late echo of an earlier attempt is skipped, not taken for a loss.
                        end, echoed = time.monotonic() + 5, False
                        while not echoed and time.monotonic() < end:
                            s.settimeout(max(0.01, end - time.monotonic()))
                            try:
                                data, _ = s.recvfrom(65536)
                            except OSError:
                                break
                            echoed = data == payload
                        if echoed:
                            good += 1
                            break
                print(good)
                """,
            ])
            return Int(outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        /// Keeps traffic flowing (healthz) until the speaker has seen `rounds` more
        /// CallMeMaybe (the agent's discovery rounds, one per 5 s at most), bounded.
        func discoveryRounds(_ rounds: Int) async -> Bool {
            let start = peer.counters.callMeMaybe
            return await eventually(timeout: .seconds(60)) {
                _ = await curl([url("/healthz")], maxTime: 5)
                return peer.counters.callMeMaybe >= start + rounds
            }
        }

        /// The agent's netcheck `net_info`, through the tunnel.
        func netInfo() async -> [String: Any]? {
            let netcheck = await curl([url("/api/v0/netcheck")])
            return jsonObject(Array(netcheck.stdout.utf8))?["net_info"] as? [String: Any]
        }

        /// Bytes the speed test (port 3) downloads in `seconds` (whole 2 MiB blocks), run in
        /// the peer's namespace.
        func download(seconds: Int) async -> Int {
            let outcome = await peerNamespace.run([
                "python3", "-c",
                """
                import socket
                s = socket.create_connection(("\(addresses.primaryText)", 3), timeout=60)
                s.sendall(b'{"version":2,"time":\(seconds)000000000,"direction":0}\\n')
                answer = b""
                while not answer.endswith(b"\\n"):
                    chunk = s.recv(1)
                    if not chunk: break
                    answer += chunk
                total = 0
                while True:
                    data = s.recv(1 << 20)
                    if not data: break
                    total += len(data)
                print(total)
                """,
            ])
            return Int(outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
    }

    /// The namespaces' wiring: "workspace" (the agent), "peer" (wireguard-go and the
    /// speaker), and any others (routers, a server); `pid:NAME` in a command is that
    /// namespace holder's pid (for `ip link … netns`).
    struct Network: Sendable {
        var extra: [String] = []
        var commands: [(String, [String])]
        /// Where the speaker's socket is bound in the peer's namespace.
        var peerBind: (address: String, port: UInt16) = (peerLAN, peerPort)
        /// What the peer's Node lists (its STUN-mapped or local addresses).
        var peerEndpoints: [String]
        /// STUN servers (coturn in the "server" namespace) added to the DERP map.
        var stun: [String] = []
        /// An endpoint the agent must advertise before the peer is introduced.
        var agentEndpoint: String?
    }

    /// Two namespaces on one link (the agent's endpoint is its LAN address).
    static func lan(mtu: Int = 1500) -> Network {
        Network(
            commands: [
                ("workspace", ["ip", "link", "add", "va", "mtu", "\(mtu)", "type", "veth", "peer", "name", "vb", "mtu", "\(mtu)", "netns", "pid:peer"]),
                ("workspace", ["ip", "addr", "add", "\(agentLAN)/24", "dev", "va"]),
                ("workspace", ["ip", "link", "set", "va", "up"]),
                ("peer", ["ip", "addr", "add", "\(peerLAN)/24", "dev", "vb"]),
                ("peer", ["ip", "link", "set", "vb", "up"]),
            ], peerEndpoints: ["\(peerLAN):\(peerPort)"], agentEndpoint: "\(agentLAN):\(agentPort)")
    }

    /// Coder's IPv6 triangle: a router namespace linking the workspace
    /// (`fdac:38fa:ffff:1::2`, over a link of `mtu`) and the peer (`fdac:38fa:ffff:2::2`),
    /// ULAs only and no NAT (so each side advertises its ULA).
    static func triangle(mtu: Int) -> Network {
        Network(
            extra: ["router"],
            commands: [
                ("router", ["ip", "link", "add", "r1", "mtu", "\(mtu)", "type", "veth", "peer", "name", "va", "mtu", "\(mtu)", "netns", "pid:workspace"]),
                ("router", ["ip", "link", "add", "r2", "type", "veth", "peer", "name", "vb", "netns", "pid:peer"]),
                ("router", ["ip", "-6", "addr", "add", "fdac:38fa:ffff:1::1/64", "dev", "r1", "nodad"]),
                ("router", ["ip", "-6", "addr", "add", "fdac:38fa:ffff:2::1/64", "dev", "r2", "nodad"]),
                ("router", ["ip", "link", "set", "r1", "up"]),
                ("router", ["ip", "link", "set", "r2", "up"]),
                ("router", ["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]),
                ("workspace", ["ip", "-6", "addr", "add", "fdac:38fa:ffff:1::2/64", "dev", "va", "nodad"]),
                ("workspace", ["ip", "link", "set", "va", "up"]),
                ("workspace", ["ip", "-6", "route", "add", "default", "via", "fdac:38fa:ffff:1::1"]),
                ("peer", ["ip", "-6", "addr", "add", "fdac:38fa:ffff:2::2/64", "dev", "vb", "nodad"]),
                ("peer", ["ip", "link", "set", "vb", "up"]),
                ("peer", ["ip", "-6", "route", "add", "default", "via", "fdac:38fa:ffff:2::1"]),
            ],
            peerBind: ("fdac:38fa:ffff:2::2", peerPort), peerEndpoints: ["[fdac:38fa:ffff:2::2]:\(peerPort)"],
            agentEndpoint: "[fdac:38fa:ffff:1::2]:\(agentPort)")
    }

    /// Coder's NAT topology (routed, no bridge): a server namespace (10.0.1.1 and 10.0.2.1,
    /// coturn on both) links router 1 (WAN 10.0.1.2, LAN 10.0.11.1 → the agent at 10.0.11.2)
    /// and router 2 (WAN 10.0.2.2, LAN 10.0.12.1 → the peer at 10.0.12.2). Each router
    /// masquerades TCP and maps its client's UDP port: easy NAT, one mapping for every
    /// destination (48011 / 48012); hard NAT, a mapping per destination (the other router:
    /// 48011 / 48012; the STUN servers: 48201+i / 48101+i), inbound only from that destination.
    static func nat(agentHard: Bool, peerHard: Bool) -> Network {
        var commands: [(String, [String])] = [
            ("server", ["ip", "link", "add", "s1", "type", "veth", "peer", "name", "w1", "netns", "pid:r1"]),
            ("server", ["ip", "link", "add", "s2", "type", "veth", "peer", "name", "w2", "netns", "pid:r2"]),
            ("server", ["ip", "addr", "add", "10.0.1.1/24", "dev", "s1"]),
            ("server", ["ip", "addr", "add", "10.0.2.1/24", "dev", "s2"]),
            ("server", ["ip", "link", "set", "s1", "up"]),
            ("server", ["ip", "link", "set", "s2", "up"]),
            ("server", ["sysctl", "-qw", "net.ipv4.ip_forward=1"]),
        ]
        for (router, wan, lanNet, client, clientPort, port, hard, stunBase, other) in [
            ("r1", "1", "11", "workspace", agentPort, 48011, agentHard, 48201, "10.0.2.2"),
            ("r2", "2", "12", "peer", peerPort, 48012, peerHard, 48101, "10.0.1.2"),
        ] {
            let wanIF = "w\(wan)"
            let lanIF = "l\(wan)"
            let clientIF = client == "workspace" ? "va" : "vb"
            let clientIP = "10.0.\(lanNet).2"
            commands += [
                (router, ["ip", "addr", "add", "10.0.\(wan).2/24", "dev", wanIF]),
                (router, ["ip", "link", "set", wanIF, "up"]),
                (router, ["ip", "link", "add", lanIF, "type", "veth", "peer", "name", clientIF, "netns", "pid:\(client)"]),
                (router, ["ip", "addr", "add", "10.0.\(lanNet).1/24", "dev", lanIF]),
                (router, ["ip", "link", "set", lanIF, "up"]),
                (router, ["ip", "route", "add", "default", "via", "10.0.\(wan).1"]),
                (router, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]),
                (router, ["iptables", "-t", "nat", "-A", "POSTROUTING", "-o", wanIF, "!", "-p", "udp", "-j", "MASQUERADE"]),
                (client, ["ip", "addr", "add", "\(clientIP)/24", "dev", clientIF]),
                (client, ["ip", "link", "set", clientIF, "up"]),
                (client, ["ip", "route", "add", "default", "via", "10.0.\(lanNet).1"]),
            ]
            // (destination or nil for all, mapped port)
            let mappings: [(String?, Int)] = hard ? [(other, port), ("10.0.1.1", stunBase), ("10.0.2.1", stunBase + 1)] : [(nil, port)]
            for (destination, mapped) in mappings {
                let to = destination.map { ["-d", $0] } ?? []
                let from = destination.map { ["-s", $0] } ?? []
                commands += [
                    (
                        router,
                        ["iptables", "-t", "nat", "-A", "POSTROUTING", "-o", wanIF, "-p", "udp", "--sport", "\(clientPort)"] + to
                            + ["-j", "SNAT", "--to-source", "10.0.\(wan).2:\(mapped)"]
                    ),
                    (
                        router,
                        ["iptables", "-t", "nat", "-A", "PREROUTING", "-i", wanIF, "-p", "udp", "--dport", "\(mapped)"] + from
                            + ["-j", "DNAT", "--to-destination", "\(clientIP):\(clientPort)"]
                    ),
                ]
            }
        }
        return Network(
            extra: ["server", "r1", "r2"], commands: commands, peerBind: ("10.0.12.2", peerPort),
            // What the peer's STUN would say: its one mapping, or its mapping towards the first STUN server.
            peerEndpoints: [peerHard ? "10.0.2.2:48101" : "10.0.2.2:48012"],
            stun: ["10.0.1.1", "10.0.2.1"],
            // Hard: the two STUN servers see two ports, so the agent also lists its mapped IP
            // with its fixed listen port (the third rule of the endpoint list).
            agentEndpoint: agentHard ? "10.0.1.2:\(agentPort)" : "10.0.1.2:48011")
    }

    static func missing() -> String? { DirectPathPrerequisites.missing() }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// Builds the two namespaces and the link, starts the agent in the workspace and the
    /// peer, waits for healthz through the tunnel, runs `body`, and ends it all.
    static func withTopology(
        _ network: Network = lan(), blockDirect: Bool = false, _ body: @escaping @Sendable (Topology) async throws -> Void
    ) async throws {
        if let missing = missing() {
            Issue.record("the direct-path test cannot run: \(missing)")
            return
        }
        var namespaces: [String: NetworkNamespace] = [:]
        for name in ["workspace", "peer"] + network.extra {
            guard let namespace = await NetworkNamespace.make() else {
                for made in namespaces.values { await made.shutDown() }
                Issue.record("`unshare -n` gave no private network namespace")
                return
            }
            namespaces[name] = namespace
        }
        let relay = DERPRelayDouble()
        try await relay.start(port: freeLoopbackPort())
        var stun: ChildProgram.Running?
        do {
            for (name, namespace) in namespaces {
                let outcome = await namespace.run(["ip", "link", "set", "lo", "up"])
                guard outcome.status == 0 else { throw Failure(description: "lo up in \(name): \(outcome.stdout)") }
            }
            for (name, command) in network.commands {
                let resolved = command.map { word in
                    word.hasPrefix("pid:") ? namespaces[String(word.dropFirst(4))].map { "\($0.holder.pid)" } ?? word : word
                }
                let outcome = await namespaces[name]!.run(resolved)
                guard outcome.status == 0 else { throw Failure(description: "\(name): \(resolved.joined(separator: " ")): \(outcome.stdout)") }
            }
            if !network.stun.isEmpty, let server = namespaces["server"] {
                stun = server.start(
                    [
                        "turnserver", "-n", "--stun-only", "--no-cli", "--no-tls", "--no-dtls", "--simple-log", "--log-file", "stdout",
                        "--listening-port", "3478",
                    ] + network.stun.flatMap { ["--listening-ip", $0] })
                // Bounded: coturn answers a STUN probe once it listens.
                let answering = await eventually(timeout: .seconds(30)) {
                    await server.run(["python3", "-c", Self.stunProbe(network.stun[0])]).stdout.hasPrefix("mapped")
                }
                guard answering else { throw Failure(description: "coturn does not answer STUN") }
            }
            try await withTopology(
                workspace: namespaces["workspace"]!, peerNamespace: namespaces["peer"]!, network: network, relay: relay, blockDirect: blockDirect, body)
        } catch {
            if let stun { await onThread { stun.kill() } }
            await relay.stop()
            for namespace in namespaces.values { await namespace.shutDown() }
            throw error
        }
        if let stun { await onThread { stun.kill() } }
        await relay.stop()
        for namespace in namespaces.values { await namespace.shutDown() }
    }

    /// A STUN binding request from Python (in the server's namespace): prints `mapped` when
    /// coturn answers.
    static func stunProbe(_ server: String) -> String {
        """
        import os, socket
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(1)
        s.sendto(b'\\x00\\x01\\x00\\x00\\x21\\x12\\xa4\\x42' + os.urandom(12), ('\(server)', 3478))
        try:
            data, _ = s.recvfrom(2048)
            print('mapped' if data[:2] == b'\\x01\\x01' else 'other')
        except OSError:
            print('silent')
        """
    }

    private static func withTopology(
        workspace: NetworkNamespace, peerNamespace: NetworkNamespace, network: Network, relay: DERPRelayDouble, blockDirect: Bool,
        _ body: @escaping @Sendable (Topology) async throws -> Void
    ) async throws {

        let agentID = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let addresses = try #require(TailnetTestAddresses(agentID: agentID))
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.agentID = Data(agentID)
        var derpMap = TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port)
        for (index, server) in network.stun.enumerated() {
            // Coder's STUN-only regions: ID 1000 + index, one node given by host name and port
            // alone, which the agent resolves (the name is the server's address text here: no
            // DNS serves the test's namespaces).
            var node = Coder_Tailnet_V2_DERPMap.Region.Node()
            node.name = "\(1000 + index)stun0"
            node.regionID = Int64(1000 + index)
            node.hostName = server
            node.stunPort = 3478
            node.stunOnly = true
            var region = Coder_Tailnet_V2_DERPMap.Region()
            region.regionID = Int64(1000 + index)
            region.regionCode = "coder_stun_\(1000 + index)"
            region.nodes = [node]
            derpMap.regions[Int64(1000 + index)] = region
        }
        manifest.derpMap = derpMap
        manifest.disableDirectConnections = blockDirect
        let double = ControlPlaneDouble(manifest: manifest)
        let coordinator = TailnetCoordinatorDouble(derpMap: derpMap)
        coordinator.install(on: double)
        let tokenFile = NSTemporaryDirectory() + "agent-token-\(UUID().uuidString)"
        try TestFile.write(tokenFile, double.token + "\n", atomically: true)
        defer { unlink(tokenFile) }

        try await double.run { url in
            let doublePort = try #require(url.split(separator: ":").last.flatMap { Int($0.filter(\.isNumber)) })
            let bridge = try #require(ChildProgram.start(["python3", "-c", NamespaceBridge.script, workspace.path, "\(relay.port)", "\(doublePort)"]))
            defer { bridge.kill() }
            let line = await onThread { bridge.readLine() }
            try #require(line == "ready", "the namespace bridge did not start: \(line)")

            let agent = try AgentDaemon.launch(
                [
                    "--net=\(workspace.path)", AgentDaemon.binaryPath, "--http-address", "127.0.0.1:0", "--agent-url", url,
                    "--agent-token-file", tokenFile, "--tailnet-listen-port", "\(agentPort)",
                ],
                executable: "/usr/bin/nsenter")
            defer { agent.cleanup() }
            let wanted = network.agentEndpoint ?? ""
            let announced = await eventually(timeout: .seconds(60)) {
                guard let node = coordinator.agentNode, node.preferredDerp == 1 else { return false }
                return blockDirect || wanted.isEmpty || node.endpoints.contains(wanted)
            }
            #expect(announced, "no node with a home region and the endpoint \(wanted): \(String(describing: coordinator.agentNode))\n\(agent.log)")
            guard announced, let node = coordinator.agentNode else { return }
            let agentKey = Array(node.key.dropFirst(2))
            let agentDisco = try #require(Disco.key(fromText: node.disco))

            let peer = try await startPeer(
                in: peerNamespace, bind: network.peerBind, agentKey: agentKey, agentDisco: agentDisco, agentAddress: addresses.primaryText, relay: relay)
            var peerNode = WorkspaceAgentTailnetTests.peerNode(peer.key)
            peerNode.disco = Disco.keyText(peer.speaker.disco.publicKey)
            peerNode.endpoints = network.peerEndpoints
            coordinator.setPeer(id: peerID, node: peerNode)
            let topology = Topology(
                workspace: workspace, peerNamespace: peerNamespace, relay: relay, coordinator: coordinator, agent: agent,
                addresses: addresses, peer: peer.speaker, agentNode: node)
            let lastTry = Mutex("")
            let reached = await eventually(timeout: .seconds(60)) {
                let health = await topology.curl([topology.url("/healthz")], maxTime: 8)
                lastTry.withLock { $0 = "\(health.status): \(health.stdout)" }
                return health.status == 0
            }
            #expect(reached, "healthz through the tunnel: \(lastTry.withLock { $0 })\n\(agent.log)")
            do {
                if reached { try await body(topology) }
            } catch {
                await peer.stop()
                throw error
            }
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            await peer.stop()
        }
    }

    /// wireguard-go in the peer's namespace, its endpoint our loopback socket there, and the
    /// speaker on that socket and on the peer's LAN address.
    static func startPeer(
        in namespace: NetworkNamespace, bind: (address: String, port: UInt16), agentKey: [UInt8], agentDisco: X25519PublicKey,
        agentAddress: String, relay: DERPRelayDouble
    ) async throws -> (key: WireGuardPrivateKey, speaker: DirectPeer, stop: @Sendable () async -> Void) {
        let interface = PeerInNamespace.interfaceName(prefix: "wgd")
        let key = WireGuardPrivateKey.generate()
        let keyFile = NSTemporaryDirectory() + "/\(interface).key"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data(Data(key.raw.bytes).base64EncodedString().utf8))
        defer { unlink(keyFile) }
        guard let wireguardGo = namespace.start(["wireguard-go", "-f", interface], environment: ["WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1"]) else {
            throw Failure(description: "wireguard-go did not start")
        }
        guard await eventually(timeout: .seconds(30), { unixSocketAccepts("/var/run/wireguard/\(interface).sock") }),
            let loopback = await namespace.udpSocket(),
            let lan = await namespace.udpSocket(address: bind.address, port: bind.port)
        else {
            await onThread { wireguardGo.kill() }
            throw Failure(description: "wireguard-go gave no UAPI socket, or the namespace no UDP sockets")
        }
        let wgPort: UInt16 = 51820
        for command in [
            [
                "wg", "set", interface, "private-key", keyFile, "listen-port", "\(wgPort)",
                "peer", Data(agentKey).base64EncodedString(), "allowed-ips", "\(agentAddress)/128", "endpoint", "127.0.0.1:\(loopback.port)",
            ],
            ["ip", "-6", "addr", "add", "\(WorkspaceAgentTailnetTests.peerAddress)/128", "dev", interface, "nodad"],
            ["ip", "link", "set", interface, "mtu", "1280", "up"],
            ["ip", "-6", "route", "add", "\(agentAddress)/128", "dev", interface],
        ] {
            let outcome = await namespace.run(command)
            guard outcome.status == 0 else {
                close(loopback.fd)
                close(lan.fd)
                await onThread { wireguardGo.kill() }
                throw Failure(description: "\(command.joined(separator: " ")) failed: \(outcome.stdout)")
            }
        }
        let speaker = DirectPeer(loopback: loopback.fd, lan: lan.fd, wireguardPort: wgPort, agentKey: X25519PublicKey(agentKey)!, agentDisco: agentDisco)
        speaker.start(key: X25519PrivateKey(key.raw.bytes)!, relay: relay)
        return (
            key, speaker,
            {
                await speaker.stop()
                _ = await namespace.run(["ip", "link", "del", interface])
                await onThread { wireguardGo.kill() }
            }
        )
    }

    @Test func theAgentGoesDirectOverTheLinkAndTheTransferSkipsTheRelay() async throws {
        try await Self.withTopology { topology in
            // The agent pings the peer's endpoint and the pong makes the path: trusted, UDP.
            let direct = await eventually(timeout: .seconds(30)) {
                guard let path = await topology.peerPath() else { return false }
                return path.path == "\(Self.peerLAN):\(Self.peerPort)" && path.trusted
            }
            let seen = await topology.peerPath()
            #expect(direct, "the agent's path to the peer: \(String(describing: seen))\n\(topology.agent.log)")
            #expect(topology.peer.counters.discoUDP > 0)
            // A transfer now goes over UDP; the relay carries almost nothing of it.
            let before = topology.peer.counters
            let bytes = await topology.download(seconds: 1)
            let after = topology.peer.counters
            #expect(bytes > 1 << 20, "downloaded \(bytes) bytes")
            let direct_ = after.udpIn - before.udpIn
            let relayed = after.derpIn - before.derpIn
            #expect(direct_ >= bytes, "UDP carried \(direct_) bytes of \(bytes)")
            #expect(relayed < bytes / 20, "DERP carried \(relayed) bytes of \(bytes)")
            // The status and the metrics say so too.
            let metrics = await topology.curl([topology.url("/debug/prometheus")])
            #expect(
                metrics.stdout.contains(#"agent_tailnet_path_bytes_total{direction="out",path="direct"}"#)
                    || metrics.stdout.contains(#"agent_tailnet_path_bytes_total{path="direct",direction="out"}"#), "\(metrics.stdout.prefix(4000))")
            let page = await topology.curl([topology.url("/debug/magicsock")])
            #expect(page.stdout.contains("\(Self.peerLAN):\(Self.peerPort) (trusted)"), "\(page.stdout)")
            // UDP through the tunnel to the workspace's loopback, over the direct path.
            let udpBefore = topology.peer.counters.udpIn
            #expect(await topology.udpEcho() == 5)
            #expect(topology.peer.counters.udpIn > udpBefore + 5 * 1232)
        }
    }

    @Test func aFloodOfGarbageAndSpoofedDiscoOnTheUDPPortIsIgnored() async throws {
        try await Self.withTopology { topology in
            let (direct, seen) = await Self.waitForDirect(topology, "\(Self.peerLAN):\(Self.peerPort)")
            #expect(direct, "\(seen)")
            // From the peer's namespace, as fast as Python sends: garbage, disco from random
            // keys, and disco under the peer's own key whose box does not open.
            let peerDisco = topology.peer.disco.publicKey.bytes.map { String(format: "%02x", $0) }.joined()
            let flood = await topology.peerNamespace.run([
                "python3", "-c",
                """
                import os, socket
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                target = ('\(Self.agentLAN)', \(Self.agentPort))
                magic = bytes([0x54, 0x53, 0xF0, 0x9F, 0x92, 0xAC])
                peer = bytes.fromhex('\(peerDisco)')
                sent = 0
                for i in range(6000):
                    kind = i % 3
                    if kind == 0:
                        data = os.urandom(1 + i % 1400)
                    elif kind == 1:
                        data = magic + os.urandom(32 + 24 + 16 + i % 1300)
                    else:
                        data = magic + peer + os.urandom(24 + 16 + i % 1300)
                    try:
                        s.sendto(data, target); sent += 1
                    except OSError:
                        pass
                print(sent)
                """,
            ])
            #expect(Int(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 5000, "\(flood)")
            // The path and the tunnel are unharmed, and the drops are counted by kind: random
            // keys cost no key agreement (unknown sender), the peer's key fails the box.
            let (still, after) = await Self.waitForDirect(topology, "\(Self.peerLAN):\(Self.peerPort)")
            #expect(still, "\(after)")
            #expect(await topology.download(seconds: 1) > 0)
            let metrics = await topology.curl([topology.url("/debug/prometheus")])
            func value(_ needle: String) -> Int {
                metrics.stdout.split(separator: "\n").first { $0.hasPrefix("agent_tailnet_disco_dropped_total") && $0.contains(needle) }
                    .flatMap { $0.split(separator: " ").last }.flatMap { Int(Double($0) ?? -1) } ?? -1
            }
            #expect(value("unknown_sender") > 500, "\(metrics.stdout.prefix(3000))")
            #expect(value("cannot_open") > 500, "\(metrics.stdout.prefix(3000))")
            #expect(metrics.stdout.contains("unverified_udp_source"), "\(metrics.stdout.prefix(3000))")
        }
    }

    /// Waits for the agent's path to the peer to be `expected` and trusted; the last seen.
    static func waitForDirect(_ topology: Topology, _ expected: String) async -> (Bool, String) {
        let direct = await eventually(timeout: .seconds(40)) {
            guard let path = await topology.peerPath() else { return false }
            return path.path == expected && path.trusted
        }
        return (direct, String(describing: await topology.peerPath()))
    }

    @Test func easyNATOnBothSidesGoesDirectThroughTheSTUNMappedEndpoints() async throws {
        try await Self.withTopology(Self.nat(agentHard: false, peerHard: false)) { topology in
            #expect(topology.agentNode.endpoints.first == "10.0.1.2:48011", "\(topology.agentNode.endpoints)")
            let (direct, seen) = await Self.waitForDirect(topology, "10.0.2.2:48012")
            #expect(direct, "\(seen)\n\(topology.agent.log)")
            let info = await topology.netInfo()
            #expect(info?["UDP"] as? Bool == true && info?["GlobalV4"] as? String == "10.0.1.2:48011", "\(String(describing: info))")
            #expect(info?["MappingVariesByDestIP"] as? Bool == false, "\(String(describing: info))")
            #expect(await topology.udpEcho() == 5)
        }
    }

    @Test func hardNATOnThePeerIsFoundThroughThePeersOwnPings() async throws {
        // The agent's pings to the peer's STUN mapping die at router 2; the peer's pings (sent
        // on the agent's CallMeMaybe) arrive from its per-destination mapping, which the agent
        // then pings and confirms.
        try await Self.withTopology(Self.nat(agentHard: false, peerHard: true)) { topology in
            let (direct, seen) = await Self.waitForDirect(topology, "10.0.2.2:48012")
            #expect(direct, "\(seen)\n\(topology.agent.log)")
        }
    }

    @Test func hardNATOnTheAgentShowsInNetcheckAndStillGoesDirect() async throws {
        try await Self.withTopology(Self.nat(agentHard: true, peerHard: false)) { topology in
            let info = await topology.netInfo()
            #expect(info?["MappingVariesByDestIP"] as? Bool == true, "\(String(describing: info))")
            let (direct, seen) = await Self.waitForDirect(topology, "10.0.2.2:48012")
            #expect(direct, "\(seen)\n\(topology.agent.log)")
        }
    }

    @Test func hardNATOnBothSidesStaysOnDERPAndWorks() async throws {
        try await Self.withTopology(Self.nat(agentHard: true, peerHard: true)) { topology in
            #expect(await topology.discoveryRounds(2), "no discovery rounds: \(topology.peer.counters)")
            let path = await topology.peerPath()
            #expect(path?.path == "derp", "\(String(describing: path))")
            #expect(await topology.download(seconds: 1) > 0)
            #expect(await topology.udpEcho() == 5)
        }
    }

    @Test func anIPv6TriangleGoesDirectAndCarriesA1232ByteUDPEcho() async throws {
        try await Self.withTopology(Self.triangle(mtu: 1500)) { topology in
            let (direct, seen) = await Self.waitForDirect(topology, "[fdac:38fa:ffff:2::2]:\(Self.peerPort)")
            #expect(direct, "\(seen)\n\(topology.agent.log)")
            let before = topology.peer.counters.udpIn
            #expect(await topology.udpEcho(size: 1232) == 5)
            #expect(topology.peer.counters.udpIn > before + 5 * 1232)
        }
    }

    @Test func anIPv6LinkWithMTU1280StaysOnDERPBecauseThePaddedPingsCannotPass() async throws {
        try await Self.withTopology(Self.triangle(mtu: 1280)) { topology in
            #expect(await topology.discoveryRounds(2), "no discovery rounds: \(topology.peer.counters)")
            let path = await topology.peerPath()
            #expect(path?.path == "derp", "\(String(describing: path))")
            #expect(topology.peer.counters.discoUDP == 0, "\(topology.peer.counters)")
            #expect(await topology.download(seconds: 1) > 0)
        }
    }

    @Test func aCutLinkFallsBackToDERPWithoutLosingTheSSHSessionAndComesBack() async throws {
        try await Self.withTopology { topology in
            let direct = await eventually(timeout: .seconds(30)) { await topology.peerPath()?.trusted == true }
            let seen = await topology.peerPath()
            #expect(direct, "never direct: \(String(describing: seen))")
            guard direct else { return }
            // An SSH session printing a line a second across the cut and the return: it leaves
            // a file when its command starts, and runs until the test leaves a stop file (at
            // most 180 lines).
            let marker = NSTemporaryDirectory() + "agent-cut-link-\(UUID().uuidString)"
            let (started, stop) = (marker + "-started", marker + "-stop")
            defer { unlink(started); unlink(stop) }
            let sshTask = Task {
                await topology.peerNamespace.run([
                    "ssh", "-F", "/dev/null", "-p", "1", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=60", "-o", "ServerAliveInterval=0",
                    topology.addresses.primaryText,
                    "touch \(started); i=0; while [ ! -e \(stop) ] && [ $i -lt 180 ]; do i=$((i+1)); echo line $i; sleep 1; done; exit 3",
                ])
            }
            // Wait until the session's command runs and its lines flow over UDP (a loaded host
            // may take long to connect), then cut the link.
            #expect(await eventually(timeout: .seconds(90)) { access(started, F_OK) == 0 }, "the SSH session never started")
            let flowing = topology.peer.counters.udpIn
            #expect(await eventually(timeout: .seconds(30)) { topology.peer.counters.udpIn > flowing })
            let down = await topology.workspace.run(["ip", "link", "set", "va", "down"])
            #expect(down.status == 0, "\(down.stdout)")
            // The agent's trust runs out (6.5 s) and it sends over DERP too: the session goes on.
            let relayed = topology.peer.counters.derpIn
            #expect(await eventually(timeout: .seconds(30)) { topology.peer.counters.derpIn > relayed + 2000 }, "no fallback to DERP: \(topology.peer.counters)")
            let fallback = await topology.peerPath()
            #expect(fallback?.trusted == false, "\(String(describing: fallback))")
            // The link returns: the heartbeat's pings find the path again, and the session's
            // lines flow over it before the test lets the session end.
            let up = await topology.workspace.run(["ip", "link", "set", "va", "up"])
            #expect(up.status == 0, "\(up.stdout)")
            let again = await eventually(timeout: .seconds(30)) { await topology.peerPath()?.trusted == true }
            let last = await topology.peerPath()
            #expect(again, "not direct again: \(String(describing: last))")
            let returned = topology.peer.counters.udpIn
            #expect(await eventually(timeout: .seconds(30)) { topology.peer.counters.udpIn > returned + 200 })
            try TestFile.write(stop, [UInt8]())
            let ssh = await sshTask.value
            // Every line arrived, in order, none lost across the two path changes.
            let lines = ssh.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            let expected = (1...max(lines.count, 1)).map { "line \($0)" }
            #expect(ssh.status == 3 && lines.count >= 3 && lines.map(String.init) == expected, "ssh across the path changes: \(ssh)")
        }
    }

    @Test func disabledDirectConnectionsSendNothingOverUDP() async throws {
        try await Self.withTopology(blockDirect: true) { topology in
            #expect(topology.agentNode.endpoints.isEmpty, "\(topology.agentNode.endpoints)")
            let bytes = await topology.download(seconds: 1)
            #expect(bytes > 0)
            let path = await topology.peerPath()
            #expect(path?.path == "derp", "\(String(describing: path))")
            let counters = topology.peer.counters
            #expect(counters.discoUDP == 0 && counters.udpIn == 0 && counters.callMeMaybe == 0, "\(counters)")
            #expect(counters.derpIn >= bytes)
            let status = await topology.curl([topology.url("/api/v0/tailnet")])
            #expect(jsonObject(Array(status.stdout.utf8))?["direct_blocked"] as? Bool == true, "\(status.stdout)")
            #expect(await topology.udpEcho() == 5)
            #expect(topology.peer.counters.udpIn == 0)
        }
    }
}

/// What the direct-path tests need of the machine (nil: all there).
enum DirectPathPrerequisites {
    static func missing() -> String? {
        if let missing = WorkspaceAgentTailnetTests.missing() { return missing }
        for tool in ["/usr/bin/ssh", "/usr/sbin/iptables", "/usr/bin/turnserver"] where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (Debian: openssh-client, iptables, coturn)"
        }
        // Network namespaces can be made here (a container may refuse them even to root).
        if system("/usr/bin/unshare -n /bin/true >/dev/null 2>&1") != 0 { return "`unshare -n` is refused: no network namespaces here" }
        return nil
    }
}
