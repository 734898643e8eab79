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

/// The shared set-up of the tailnet end-to-end tests: relay, control plane with its
/// coordinator, the agent binary, wireguard-go in a namespace bridged to the relay, the
/// peer's NODE acked and healthz answered through the tunnel; then the test's body; then the
/// graceful end (SIGTERM: exit 0 and one `disconnect{}`).
extension WorkspaceAgentTailnetTests {
    /// Everything a test drives once the tunnel is up.
    struct Tunnel: Sendable {
        let relay: DERPRelayDouble
        let double: ControlPlaneDouble
        let coordinator: TailnetCoordinatorDouble
        let agent: AgentDaemon
        let addresses: TailnetTestAddresses
        /// The agent's node key (32 bytes, without the `np` prefix).
        let agentKey: [UInt8]
        let peer: PeerInNamespace

        /// `http://[agent]:port/path`, the agent's primary tailnet address.
        func url(port: Int = 4, _ path: String) -> String {
            "http://[\(addresses.primaryText)]:\(port)\(path)"
        }

        /// curl inside the namespace (so through the tunnel), bounded by `--max-time`.
        func curl(_ arguments: [String], maxTime: Int = 20) async -> ChildProgram.Outcome {
            await peer.namespace.run(["curl", "-sS", "-g", "--max-time", "\(maxTime)"] + arguments)
        }

        /// Waits until healthz answers through the tunnel (WireGuard may need a handshake
        /// retry, 5 s); returns whether it did and the last try, for messages.
        func healthz(timeout: Duration = .seconds(60)) async -> (reached: Bool, last: String) {
            let lastTry = Mutex("")
            let reached = await eventually(timeout: timeout) {
                let health = await curl([url("/healthz")], maxTime: 8)
                lastTry.withLock { $0 = "\(health.status): \(health.stdout)" }
                return health.status == 0
            }
            return (reached, lastTry.withLock { $0 })
        }

        /// How many times the coordinator recorded an ack of the peer's NODE.
        var peerAcks: Int { coordinator.recorded.withLock { $0.acks.filter { $0 == WorkspaceAgentTailnetTests.peerID }.count } }
    }

    /// Runs `body` with a working tunnel (see the extension's comment). `configure` may change
    /// the manifest and the relay before the agent starts.
    static func withTunnel(
        configure: @Sendable (inout Coder_Agent_V2_Manifest, DERPRelayDouble) -> Void = { _, _ in },
        _ body: @escaping @Sendable (Tunnel) async throws -> Void
    ) async throws {
        if let missing = missing() {
            Issue.record("the tailnet test cannot run: \(missing)")
            return
        }
        let relay = DERPRelayDouble()
        // A port below the ephemeral range: a resilience test restarts the relay on it, and a
        // kernel-chosen one could be handed to another socket while the relay is down.
        try await relay.start(port: freeLoopbackPort())
        do {
            try await withTunnel(relay: relay, configure: configure, body)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    private static func withTunnel(
        relay: DERPRelayDouble, configure: @Sendable (inout Coder_Agent_V2_Manifest, DERPRelayDouble) -> Void,
        _ body: @escaping @Sendable (Tunnel) async throws -> Void
    ) async throws {
        let agentID = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let addresses = try #require(TailnetTestAddresses(agentID: agentID))
        var manifest = ControlPlaneDouble.defaultManifest
        manifest.agentID = Data(agentID)
        manifest.derpMap = TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port)
        configure(&manifest, relay)
        let double = ControlPlaneDouble(manifest: manifest)
        let coordinator = TailnetCoordinatorDouble(derpMap: TailnetCoordinatorDouble.loopbackDERPMap(relayPort: relay.port))
        coordinator.install(on: double)
        let tokenFile = NSTemporaryDirectory() + "agent-token-\(UUID().uuidString)"
        try TestFile.write(tokenFile, (double.token + "\n"), atomically: true)
        defer { unlink(tokenFile) }

        try await double.run { url in
            let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0", "--agent-url", url, "--agent-token-file", tokenFile])
            defer { agent.cleanup() }
            // The agent connects to its home relay before it announces a node with it.
            let announced = await eventually(timeout: .seconds(60)) { coordinator.agentNode?.preferredDerp == 1 }
            #expect(announced, "no node with a home region: \(agent.log)")
            guard announced, let node = coordinator.agentNode else { return }
            #expect(node.addresses == addresses.prefixes && node.allowedIps == addresses.prefixes)
            #expect(node.disco.hasPrefix("discokey:") && node.disco.utf8.count == 73)
            // Direct endpoints (the host's addresses with the agent's UDP port) may be listed;
            // the peer here is reached through the relay alone.
            #expect(node.endpoints.allSatisfy { DiscoEndpoint($0) != nil } && node.key.count == 34, "\(node.endpoints)")
            let agentKey = Array(node.key.dropFirst(2))
            #expect(relay.connectedKeys.contains(X25519PublicKey(agentKey)!))

            let peer = try await PeerInNamespace.start(agentKey: agentKey, agentAddress: addresses.primaryText, relay: relay)
            let tunnel = Tunnel(
                relay: relay, double: double, coordinator: coordinator, agent: agent, addresses: addresses,
                agentKey: agentKey, peer: peer)
            do {
                coordinator.setPeer(id: Self.peerID, node: Self.peerNode(peer.key))
                #expect(await eventually(timeout: .seconds(30)) { tunnel.peerAcks > 0 })
                // HTTP over the tunnel to port 4: wireguard-go hands the handshake to our
                // bridge, the relay carries it to the agent.
                let (reached, last) = await tunnel.healthz()
                #expect(reached, "curl through the tunnel: \(last)\nagent: \(agent.log)")
                if reached { try await body(tunnel) }
            } catch {
                await peer.shutDown()
                throw error
            }
            agent.signal(SIGTERM)
            #expect(await agent.exitStatus() == 0, "\(agent.log)")
            // The graceful end: disconnect{} on the coordination stream.
            // The double may still be reading the agent's last frames when the agent has exited.
            #expect(await eventually(timeout: .seconds(30)) { coordinator.recorded.withLock { $0.disconnects } == 1 }, "\(agent.log)")
            await peer.shutDown()
        }
    }
}

/// A small HTTP server on 127.0.0.1 in the root namespace (Python's, a child we start and
/// end): `POST` answers `<bytes> <sha256 hex>` of the body it read, `GET` sends the file
/// given. Reached through the tunnel as a forwarded port.
struct ChecksumServer: Sendable {
    let port: Int
    let child: ChildProgram.Running

    static let script = #"""
        import hashlib, http.server, sys
        path, port = sys.argv[1], int(sys.argv[2])
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            def reply(self, body):
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.send_header('Connection', 'close')
                self.end_headers()
                self.wfile.write(body)
            def do_POST(self):
                size = int(self.headers['Content-Length'])
                digest = hashlib.sha256()
                got = 0
                while got < size:
                    chunk = self.rfile.read(min(65536, size - got))
                    if not chunk:
                        break
                    digest.update(chunk)
                    got += len(chunk)
                self.reply(('%d %s' % (got, digest.hexdigest())).encode())
            def do_GET(self):
                with open(path, 'rb') as f:
                    self.reply(f.read())
            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(('127.0.0.1', port), Handler)
        print('listening', flush=True)
        server.serve_forever()
        """#

    /// Starts the server serving `file` for GET; nil if it did not say it listens.
    static func start(serving file: String) async -> ChecksumServer? {
        let port = freeLoopbackPort()
        guard let child = ChildProgram.start(["python3", "-c", script, file, "\(port)"]) else { return nil }
        // Bounded: the line, or EOF if Python ends.
        let line = await onThread { child.readLine() }
        guard line == "listening" else {
            await onThread { child.kill() }
            return nil
        }
        return ChecksumServer(port: port, child: child)
    }

    func stop() async {
        await onThread { [child] in child.kill() }
    }
}

/// sha256 of a file as `sha256sum` prints it (hex), or nil.
func sha256Hex(ofFile path: String) async -> String? {
    let outcome = await ChildProgram.run(["sha256sum", "-b", path])
    guard outcome.status == 0, let hex = outcome.stdout.split(separator: " ").first, hex.count == 64 else { return nil }
    return String(hex)
}
