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

/// Bulk bytes both ways (a forwarded port and the file API on port 4),
/// and a WebSocket (git watch) through the tunnel. Same suite, so still serialized.
extension WorkspaceAgentTailnetTests {
    static let tenMiB = 10 * 1024 * 1024

    /// `count` random bytes written to `path` (on a thread: file I/O blocks).
    static func writeRandomFile(_ path: String, count: Int) async -> Bool {
        await onThread {
            var generator = SystemRandomNumberGenerator()
            var bytes = [UInt8](repeating: 0, count: count)
            bytes.withUnsafeMutableBytes { raw in
                let words = raw.bindMemory(to: UInt64.self)
                for index in words.indices { words[index] = generator.next() }
            }
            return FileManager.default.createFile(atPath: path, contents: Data(bytes))
        }
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
    }

    @Test func tenMebibytesEachWayArriveByteExact() async throws {
        try await Self.withTunnel { tunnel in
            let directory = NSTemporaryDirectory() + "tailnet-bytes-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let up = directory + "/up.bin", down = directory + "/down.bin"
            #expect(await Self.writeRandomFile(up, count: Self.tenMiB))
            #expect(await Self.writeRandomFile(down, count: Self.tenMiB))
            let upHash = try #require(await sha256Hex(ofFile: up))
            let downHash = try #require(await sha256Hex(ofFile: down))

            // A forwarded port: a server on the workspace's loopback counts and hashes the
            // upload, and serves the download.
            let server = try #require(await ChecksumServer.start(serving: down), "python3's http.server did not start")
            let upload = await tunnel.curl(
                [
                    "-X", "POST", "-H", "Expect:", "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + up,
                    tunnel.url(port: server.port, "/upload"),
                ], maxTime: 120)
            #expect(upload.status == 0 && upload.stdout == "\(Self.tenMiB) \(upHash)", "upload via a forwarded port: \(upload.status) \(upload.stdout)")
            let got = directory + "/got.bin"
            let download = await tunnel.curl(["-o", got, tunnel.url(port: server.port, "/download")], maxTime: 120)
            #expect(download.status == 0, "download via a forwarded port: \(download.stdout)")
            #expect(Self.fileSize(got) == Self.tenMiB)
            #expect(await sha256Hex(ofFile: got) == downHash)
            await server.stop()

            // The file API on port 4: write-file streams the body to disk, read-file back.
            let written = directory + "/written.bin"
            let write = await tunnel.curl(
                [
                    "-X", "POST", "-H", "Expect:", "--data-binary", "@" + up, "-w", "\n%{http_code}",
                    tunnel.url("/api/v0/write-file?path=\(written)"),
                ], maxTime: 120)
            #expect(write.status == 0 && write.stdout.hasSuffix("\n200"), "write-file: \(write.status) \(write.stdout)")
            #expect(Self.fileSize(written) == Self.tenMiB)
            #expect(await sha256Hex(ofFile: written) == upHash)
            let read = directory + "/read.bin"
            let readOutcome = await tunnel.curl(
                ["-o", read, "-w", "%{http_code}", tunnel.url("/api/v0/read-file?path=\(down)")], maxTime: 120)
            #expect(readOutcome.status == 0 && readOutcome.stdout == "200", "read-file: \(readOutcome.status) \(readOutcome.stdout)")
            #expect(Self.fileSize(read) == Self.tenMiB)
            #expect(await sha256Hex(ofFile: read) == downHash)
        }
    }

    /// The open-connections gauge from the agent's loopback metrics (the request asking
    /// counts itself), or nil if it did not answer.
    static func openConnections(_ api: RawHTTPClient) async -> Int? {
        guard let text = try? await api.request("GET", "/metrics").bodyText else { return nil }
        let line = text.split(separator: "\n").first { $0.hasPrefix("agent_http_connections ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
    }

    /// A tunnel client that vanishes in the middle of a download: its channel closes and
    /// its connection slot is given back.
    @Test func aClientThatVanishesMidDownloadFreesItsConnection() async throws {
        try await Self.withTunnel { tunnel in
            let directory = NSTemporaryDirectory() + "tailnet-vanish-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // 1 GiB, sparse: far more than the client reads before it goes.
            let big = directory + "/big.bin"
            try TestFile.write(big, [UInt8]())
            #expect(truncate(big, 1 << 30) == 0)
            let api = RawHTTPClient(port: try await tunnel.agent.port())
            // Read slowly, then killed by its own time limit mid-body.
            let download = Task {
                await tunnel.curl(["-o", "/dev/null", "--limit-rate", "512K", tunnel.url("/api/v0/read-file?path=\(big)")], maxTime: 4)
            }
            // Counted while it reads: this request's connection and the download's.
            #expect(await eventually(timeout: .seconds(60)) { (await Self.openConnections(api) ?? 0) >= 2 }, "\(tunnel.agent.log)")
            let outcome = await download.value
            #expect(outcome.status == 28, "curl should stop at its time limit: \(outcome.status) \(outcome.stdout)")
            // Gone: only the asking connection is left.
            #expect(await eventually(timeout: .seconds(60)) { await Self.openConnections(api) == 1 }, "\(tunnel.agent.log)")
            #expect(await tunnel.healthz().reached)
        }
    }

    @Test func gitWatchWebSocketUpgradesAndStreamsThroughTheTunnel() async throws {
        try await Self.withTunnel { tunnel in
            let chat = "3b4c5d6e-7f80-4912-a3b4-c5d6e7f8091a"
            let root = NSTemporaryDirectory() + "tailnet-repo-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: root) }
            await GitCLI.run(["init", "-q"], in: root)
            try TestFile.write(root + "/f.txt", "one\ntwo\nthree\n".utf8)
            await GitCLI.run(["add", "."], in: root)
            await GitCLI.run(["commit", "-q", "-m", "init"], in: root)

            // A tool call's edit through the tunnel records the repository for the chat.
            let edit = await tunnel.peer.namespace.run([
                "curl", "-sS", "-g", "--max-time", "20", "-X", "POST", "-H", "Coder-Chat-Id: \(chat)",
                "--data-binary", "one\nTWO\nthree\n", "-w", "\n%{http_code}", tunnel.url("/api/v0/write-file?path=\(root)/f.txt"),
            ])
            #expect(edit.status == 0 && edit.stdout.hasSuffix("\n200"), "write-file: \(edit.stdout)")

            // The watch socket, spoken by hand from the namespace: 101 with the right accept,
            // then the chat's repository in a `changes` message.
            let watch = await tunnel.peer.namespace.run([
                "python3", "-c", TailnetScripts.webSocketWatch, tunnel.addresses.primaryText,
                "/api/v0/git/watch?chat_id=\(chat)", root,
            ])
            #expect(watch.status == 0, "git watch through the tunnel: \(watch.stdout)")
            let lines = watch.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("status HTTP/1.1 101") == true, "\(watch.stdout)")
            #expect(lines.contains("accept ok"), "\(watch.stdout)")
            let message = try #require(lines.last { $0.hasPrefix("message ") }.map { String($0.dropFirst(8)) }, "\(watch.stdout)")
            let json = try #require(jsonObject(Array(message.utf8)))
            #expect(json["type"] as? String == "changes")
            let repository = (json["repositories"] as? [[String: Any]])?.first { $0["repo_root"] as? String == root }
            #expect((repository?["unified_diff"] as? String)?.contains("+TWO") == true, "\(message)")
        }
    }
}

extension TailnetScripts {
    /// A WebSocket client by hand (no library): argv = address, path, repository root. Prints
    /// `status <line>`, `accept ok` when Sec-WebSocket-Accept is right, sends a masked
    /// `{"type":"refresh"}`, then `message <text>` for text messages until a `changes` one
    /// names the root (exit 0). Bounded: 20 s per read, 64 frames.
    static let webSocketWatch = #"""
        import base64, hashlib, json, os, socket, struct, sys
        address, path, root = sys.argv[1], sys.argv[2], sys.argv[3]
        s = socket.create_connection((address, 4), timeout=20)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(('GET %s HTTP/1.1\r\nHost: [%s]:4\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                   'Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n' % (path, address, key)).encode())
        buffer = b''
        while b'\r\n\r\n' not in buffer:
            chunk = s.recv(4096)
            if not chunk or len(buffer) > 65536:
                print('no response head', buffer[:200]); sys.exit(1)
            buffer += chunk
        head, buffer = buffer.split(b'\r\n\r\n', 1)
        lines = head.decode('latin-1').split('\r\n')
        print('status', lines[0], flush=True)
        if lines[0].split(' ')[1] != '101':
            sys.exit(1)
        expected = base64.b64encode(hashlib.sha1((key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').encode()).digest()).decode()
        headers = {l.split(':', 1)[0].strip().lower(): l.split(':', 1)[1].strip() for l in lines[1:] if ':' in l}
        if headers.get('sec-websocket-accept') == expected:
            print('accept ok', flush=True)
        payload = b'{"type":"refresh"}'
        mask = os.urandom(4)
        s.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        def need(n):
            global buffer
            while len(buffer) < n:
                chunk = s.recv(65536)
                if not chunk:
                    print('closed'); sys.exit(1)
                buffer += chunk
            out, buffer = buffer[:n], buffer[n:]
            return out
        for _ in range(64):
            b0, b1 = need(2)
            length = b1 & 0x7f
            if length == 126:
                length = struct.unpack('>H', need(2))[0]
            elif length == 127:
                length = struct.unpack('>Q', need(8))[0]
            data = need(length)
            opcode = b0 & 0x0f
            if opcode == 8:
                print('close frame', data.hex()); sys.exit(1)
            if opcode != 1:
                continue
            text = data.decode()
            print('message', text, flush=True)
            message = json.loads(text)
            if message.get('type') == 'changes' and any(r.get('repo_root') == root for r in message.get('repositories', [])):
                sys.exit(0)
        sys.exit(1)
        """#
}
