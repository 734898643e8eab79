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

/// End to end, with real parts: the agent binary against the control-plane double
/// (coordination and DERP map over the real dRPC), the DERP relay double, and Debian's real
/// wireguard-go with a TUN in a private network namespace as the peer coderd would be. The
/// test bridges wireguard-go's UDP socket to the relay with a DERP client of its own under
/// wireguard-go's key; the namespace's kernel does TCP, ICMP and TSMP through the TUN. Each
/// test has its own namespace, relay and agent, so they run side by side.
/// The limit is wide: the copies are CPU through debug builds of the agent and relay (about
/// 0.2 CPU-seconds a MiB), and beside the rest of the suite on a loaded 2-core host they
/// take tens of times longer than alone.
@Suite(.timeLimit(.minutes(10)))
struct WorkspaceAgentTailnetTests {
    static let peerAddress = "fd7a:115c:a1e0::c0"
    static let peerID = [UInt8](repeating: 0xc0, count: 16)

    static func missing() -> String? {
        for tool in ["/usr/bin/wireguard-go", "/usr/bin/wg", "/usr/sbin/ip", "/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/curl", "/usr/bin/python3"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing (Debian: wireguard-go, wireguard-tools, iproute2, util-linux, curl, python3)"
        }
        if !FileManager.default.fileExists(atPath: "/dev/net/tun") { return "/dev/net/tun is missing: wireguard-go needs a TUN device" }
        if getuid() != 0 { return "the test must run as root (network namespaces, TUN)" }
        return nil
    }

    /// The peer's Node as coderd's would be: its key, a disco key, home region 1, one /128.
    static func peerNode(_ key: WireGuardPrivateKey) -> Coder_Tailnet_V2_Node {
        var node = Coder_Tailnet_V2_Node()
        node.id = 42
        node.key = Data(Array("np".utf8) + key.publicKey.bytes)
        node.disco = "discokey:" + String(repeating: "5a", count: 32)
        node.preferredDerp = 1
        node.addresses = ["\(peerAddress)/128"]
        node.allowedIps = node.addresses
        return node
    }

    @Test func coderdReachesTheHTTPAPIAndForwardedPortsThroughTheTunnel() async throws {
        try await Self.withTunnel { tunnel in
            let addresses = tunnel.addresses
            let peer = tunnel.peer
            // TSMP: a ping answered with a pong from the pinged address (coderd's AwaitReachable).
            let tsmp = await peer.namespace.run(["python3", "-c", TailnetScripts.tsmpPing(to: addresses.primaryText)])
            #expect(tsmp.status == 0 && tsmp.stdout.contains("pong ok"), "TSMP: \(tsmp.stdout)")

            // A process started and its output read through the tunnel.
            let start = await tunnel.curl([
                "-X", "POST", "-H", "Content-Type: application/json",
                "-d", #"{"command":"echo through the tunnel"}"#, tunnel.url("/api/v0/processes/start"),
            ])
            let id = try #require(jsonObject(Array(start.stdout.utf8))?["id"] as? String, "start: \(start.stdout)")
            let output = await tunnel.curl([tunnel.url("/api/v0/processes/\(id)/output?wait=true")])
            #expect(jsonObject(Array(output.stdout.utf8))?["output"] as? String == "through the tunnel\n", "output: \(output.stdout)")

            // The operator's status route says the same, on the agent's loopback listener.
            let client = RawHTTPClient(port: try await tunnel.agent.port())
            let status = try await client.request("GET", "/api/v0/tailnet")
            let statusJSON = try #require(jsonObject(status.body))
            #expect(statusJSON["enabled"] as? Bool == true && jsonInt(statusJSON["home_region"]) == 1, "\(statusJSON)")
            #expect((statusJSON["peers"] as? [Any])?.count == 1, "\(statusJSON)")

            // The diagnostics coderd and support bundles read, through the tunnel: netcheck's
            // DERP-only truth, the magicsock page, the manifest, the metrics.
            let netcheck = await tunnel.curl([tunnel.url("/api/v0/netcheck")])
            let netcheckJSON = try #require(jsonObject(Array(netcheck.stdout.utf8)), "netcheck: \(netcheck.stdout)")
            let netInfo = try #require(netcheckJSON["net_info"] as? [String: Any], "\(netcheckJSON)")
            #expect(jsonInt(netInfo["PreferredDERP"]) == 1 && netInfo["WorkingUDP"] as? Bool == false, "\(netInfo)")
            #expect(netcheckJSON["severity"] as? String != nil && netcheckJSON["interfaces"] is [String: Any], "\(netcheckJSON)")
            let page = await tunnel.curl([tunnel.url("/debug/magicsock")])
            #expect(page.stdout.contains("<h1>magicsock</h1>") && page.stdout.contains("nodekey:"), "magicsock: \(page.stdout)")
            let manifest = await tunnel.curl([tunnel.url("/debug/manifest")])
            #expect(jsonObject(Array(manifest.stdout.utf8))?["agent_name"] is String, "manifest: \(manifest.stdout)")
            let prometheus = await tunnel.curl([tunnel.url("/debug/prometheus")])
            #expect(prometheus.stdout.contains("# TYPE"), "prometheus: \(prometheus.stdout.prefix(200))")
            let hello = await tunnel.curl([tunnel.url("/")])
            #expect(hello.stdout.contains("Hello from the agent!"), "hello: \(hello.stdout)")

            // SSH on ports 1 (coder ssh) and 22 (Coder Connect), with OpenSSH's client in the
            // peer's namespace.
            for (port, address) in [(1, addresses.primaryText), (22, addresses.primaryText)] {
                let ssh = await peer.namespace.run([
                    "ssh", "-F", "/dev/null", "-p", "\(port)", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=60", address, "echo ssh via port \(port); exit 7",
                ])
                #expect(ssh.status == 7 && ssh.stdout == "ssh via port \(port)\n", "ssh to [\(address)]:\(port): \(ssh)")
            }

            // 32 MiB (four SSH windows) up with scp and back down with sftp through the tunnel,
            // byte for byte. The 100 MiB copies are on loopback (AgentSSHTests) and in
            // `agent-bench ssh`: here, in a debug build beside the rest of the suite, 100 MiB
            // each way took over 300 s and was the suite's long pole.
            let files = NSTemporaryDirectory() + "tunnel-scp-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: files) }
            let sshOptions = "-F /dev/null -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR -o ConnectTimeout=60"
            let copies = await peer.namespace.run(
                [
                    "sh", "-c",
                    """
                    set -e
                    cd \(files)
                    head -c \(32 << 20) /dev/urandom > source
                    scp -P 1 \(sshOptions) source '[\(addresses.primaryText)]':\(files)/by-scp
                    echo "get \(files)/by-scp by-sftp" | sftp -q -P 1 \(sshOptions) '[\(addresses.primaryText)]' >/dev/null
                    cmp source by-scp && cmp source by-sftp && wc -c < by-sftp
                    """,
                ], timeout: .seconds(480))  // Beside the whole suite on a loaded 2-core host it ran past 300 s.
            #expect(copies.status == 0 && copies.stdout == "\(32 << 20)\n", "scp and sftp through the tunnel: \(copies)")

            // The reconnecting PTY on port 2 (the web terminal): attach, type, detach, reattach
            // and see the replay, then exit (which closes the connection).
            let pty = await peer.namespace.run([
                "python3", "-c",
                """
                import json, socket, struct, uuid
                rid = str(uuid.uuid4())
                def attach():
                    s = socket.create_connection(("\(addresses.primaryText)", 2), timeout=60)
                    body = json.dumps({"ID": rid, "Height": 24, "Width": 80, "Command": "sh", "Container": "", "ContainerUser": "", "BackendType": ""}).encode()
                    s.sendall(struct.pack("<H", len(body)) + body)
                    return s
                def read_until(s, marker):
                    got = b""
                    while marker not in got:
                        chunk = s.recv(65536)
                        if not chunk: break
                        got += chunk
                    return got
                s = attach()
                s.sendall(json.dumps({"data": "echo tun-$((6*7))\\r"}).encode())
                print("typed", b"tun-42" in read_until(s, b"tun-42"))
                s.close()
                s = attach()
                print("replayed", b"tun-42" in read_until(s, b"tun-42"))
                s.sendall(json.dumps({"data": "exit\\r"}).encode())
                read_until(s, b"never")
                print("closed")
                """,
            ])
            #expect(pty.stdout == "typed True\nreplayed True\nclosed\n", "reconnecting pty: \(pty)")

            // The speed test on port 3 (`coder speedtest`): a 1 s download, whole 2 MiB blocks
            // until the agent closes.
            let speedtest = await peer.namespace.run([
                "python3", "-c",
                """
                import socket
                s = socket.create_connection(("\(addresses.primaryText)", 3), timeout=60)
                s.sendall(b'{"version":2,"time":1000000000,"direction":0}\\n')
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
                print(answer.decode().strip(), total > 0 and total % (2 << 20) == 0)
                """,
            ])
            #expect(speedtest.stdout == "{} True\n", "speedtest: \(speedtest)")

            // A forwarded port: a server on the workspace's loopback, reached as [agent]:port.
            let server = try #require(OneShotServer(reply: "forwarded hello\n"))
            defer { server.stop() }
            let forwarded = await tunnel.curl([tunnel.url(port: server.port, "/")])
            #expect(forwarded.stdout.contains("forwarded hello"), "forwarded: \(forwarded.stdout)")
            // A reserved port is refused at once.
            let reserved = await tunnel.curl([tunnel.url(port: 5, "/")], maxTime: 10)
            #expect(reserved.status == 7, "port 5: \(reserved.status) \(reserved.stdout)")
            // The stack's own counts, as of the scrape: the one forward, the one refusal.
            let metrics = try await client.request("GET", "/metrics").bodyText
            // At least once: on a loaded host curl may send its SYN again before the reset.
            let refused = metrics.split(separator: "\n").first { $0.hasPrefix("agent_tailnet_tcp_refused_total{reason=\"reserved_port\"} ") }
            #expect((refused?.split(separator: " ").last.flatMap { Double($0) } ?? 0) >= 1, "\(metrics)")
            #expect(metrics.contains("agent_tailnet_tcp_forwarded_total 1\n"), "\(metrics)")
            // Every family the tunnel adds is described (the agent's others: WorkspaceAgentMetricsTests).
            #expect(!metrics.contains("no description yet"), "\(metrics)")
        }
    }
}

/// The agent's two addresses as the test computes them (the spec's derivation).
struct TailnetTestAddresses {
    let primaryText: String
    let prefixes: [String]

    init?(agentID: [UInt8]) {
        guard agentID.count == 16 else { return nil }
        func text(_ prefix: [UInt8]) -> String {
            let bytes = prefix + agentID[6...]
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        primaryText = text([0xfd, 0x7a, 0x11, 0x5c, 0xa1, 0xe0])
        prefixes = [primaryText + "/128", text([0xfd, 0x60, 0x62, 0x7a, 0xa4, 0x2b]) + "/128"]
    }
}

/// wireguard-go in a private namespace, its UDP socket bridged to the DERP relay by a DERP
/// client with wireguard-go's own key (what magicsock does for coderd).
final class PeerInNamespace: Sendable {
    let namespace: NetworkNamespace
    let key: WireGuardPrivateKey
    let interface: String
    let wireguardGo: ChildProgram.Running
    let derp: DERPClient
    let socket: Int32
    private let stopping = Atomic<Bool>(false)

    private init(
        namespace: NetworkNamespace, key: WireGuardPrivateKey, interface: String, wireguardGo: ChildProgram.Running,
        derp: DERPClient, socket: Int32
    ) {
        self.namespace = namespace
        self.key = key
        self.interface = interface
        self.wireguardGo = wireguardGo
        self.derp = derp
        self.socket = socket
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    private static let peerCount = Atomic<Int>(0)

    /// A wireguard-go interface name unique in this process (`prefix`, the pid, a counter;
    /// at most 15 bytes for a prefix of 3): its UAPI socket (/var/run/wireguard/<name>.sock)
    /// is in the shared file system, so two peers of one name configure each other's
    /// wireguard-go, and a previous run's socket may not be gone yet.
    static func interfaceName(prefix: String) -> String {
        "\(prefix)\(getpid() % 100_000)n\(peerCount.add(1, ordering: .relaxed).newValue % 1000)"
    }

    static func start(agentKey: [UInt8], agentAddress: String, relay: DERPRelayDouble) async throws -> PeerInNamespace {
        guard let namespace = await NetworkNamespace.make() else { throw Failure(description: "`unshare -n` gave no private network namespace") }
        let interface = interfaceName(prefix: "wgp")
        let key = WireGuardPrivateKey.generate()
        let keyFile = NSTemporaryDirectory() + "/\(interface).key"
        _ = FileManager.default.createFile(atPath: keyFile, contents: Data(Data(key.raw.bytes).base64EncodedString().utf8))
        defer { unlink(keyFile) }
        _ = await namespace.run(["ip", "link", "set", "lo", "up"])
        guard let wireguardGo = namespace.start(["wireguard-go", "-f", interface], environment: ["WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD": "1"]) else {
            await namespace.shutDown()
            throw Failure(description: "wireguard-go did not start")
        }
        guard await eventually(timeout: .seconds(30), { unixSocketAccepts("/var/run/wireguard/\(interface).sock") }),
            let udp = await namespace.udpSocket()
        else {
            await onThread { wireguardGo.kill() }
            await namespace.shutDown()
            throw Failure(description: "wireguard-go gave no UAPI socket, or no UDP socket in the namespace")
        }
        let agentPublic = Data(agentKey).base64EncodedString()
        let wgPort = 51820
        for command in [
            [
                "wg", "set", interface, "private-key", keyFile, "listen-port", "\(wgPort)",
                "peer", agentPublic, "allowed-ips", "\(agentAddress)/128", "endpoint", "127.0.0.1:\(udp.port)",
            ],
            ["ip", "-6", "addr", "add", "\(WorkspaceAgentTailnetTests.peerAddress)/128", "dev", interface, "nodad"],
            ["ip", "link", "set", interface, "mtu", "1280", "up"],
            ["ip", "-6", "route", "add", "\(agentAddress)/128", "dev", interface],
        ] {
            let outcome = await namespace.run(command)
            guard outcome.status == 0 else {
                close(udp.fd)
                await onThread { wireguardGo.kill() }
                await namespace.shutDown()
                throw Failure(description: "\(command.joined(separator: " ")) failed: \(outcome.stdout)")
            }
        }
        let fd = udp.fd
        let derpKey = X25519PrivateKey(key.raw.bytes)!
        let agent = X25519PublicKey(agentKey)!
        // Relay → wireguard-go: every packet from the agent goes to wireguard-go's port.
        let derp = DERPClient(privateKey: derpKey, node: relay.node(regionID: 1)) { packet in
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(wgPort).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = packet.packet.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
        }
        derp.start()
        let peer = PeerInNamespace(namespace: namespace, key: key, interface: interface, wireguardGo: wireguardGo, derp: derp, socket: fd)
        // wireguard-go → relay: a thread reads the UDP socket until stop().
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while !peer.stopping.load(ordering: .relaxed) {
                guard poll(&poller, 1, 200) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { continue }
                _ = derp.send(to: agent, packet: buffer[0..<count])
            }
        }.start()
        return peer
    }

    /// Ends the bridge, wireguard-go and the namespace (awaited, so that the next test
    /// starts from a clean slate).
    func shutDown() async {
        stopping.store(true, ordering: .relaxed)
        await derp.close()
        _ = await namespace.run(["ip", "link", "del", interface])
        await onThread { [wireguardGo] in wireguardGo.kill() }
        await namespace.shutDown()
        // The reader thread polls every 200 ms: let it see `stopping` before the close.
        try? await Task.sleep(for: .milliseconds(300))
        close(socket)
    }
}

/// A one-connection-at-a-time HTTP server on 127.0.0.1 that answers every request with `reply`.
final class OneShotServer: Sendable {
    let port: Int
    let fd: Int32

    init?(reply: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let port = freeLoopbackPort()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, listen(fd, 8) == 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
        self.port = port
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: \(reply.utf8.count)\r\nConnection: close\r\n\r\n\(reply)".utf8)
        Thread {
            // Bounded: at most 16 connections, then the thread ends.
            for _ in 0..<16 {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                _ = response.withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
                close(client)
            }
        }.start()
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

enum TailnetScripts {
    /// A TSMP ping (IP protocol 99, `p` + 8 bytes) to `address` on a raw socket; prints
    /// `pong ok` when the answer is `o` + the same 8 bytes + port 0.
    static func tsmpPing(to address: String) -> String {
        """
        import socket, os, select, sys
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, 99)
        data = os.urandom(8)
        for attempt in range(10):
            s.sendto(b'p' + data, ('\(address)', 0))
            r, _, _ = select.select([s], [], [], 2)
            if r:
                reply, _ = s.recvfrom(2048)
                if reply == b'o' + data + b'\\x00\\x00':
                    print('pong ok'); sys.exit(0)
                print('unexpected', reply.hex())
        print('no pong'); sys.exit(1)
        """
    }
}
