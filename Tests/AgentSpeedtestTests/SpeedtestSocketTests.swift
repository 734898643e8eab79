import AgentCore
import AgentSpeedtest
import AgentTestSupport
import Foundation
import NIOCore
import NIOPosix
import Testing

/// The speed test served on a real loopback channel by the handler the tailnet uses, driven
/// by a client in Python that speaks the protocol as tailscale's Go client does.
@Suite(.timeLimit(.minutes(2)))
struct SpeedtestSocketTests {
    /// Sends the request (argv: port, then the request's text), prints the answer line, then
    /// downloads until the agent closes, or uploads for `upload_seconds` and half-closes and
    /// waits for the agent's close.
    static let client = #"""
        import socket, sys, time
        port, request, upload_seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(request.encode())
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(1)
            if not chunk: break
            answer += chunk
        print("answer", answer.decode().rstrip("\n"))
        if upload_seconds > 0:
            block, sent, end = b"u" * (1 << 20), 0, time.monotonic() + upload_seconds
            while time.monotonic() < end:
                s.sendall(block)
                sent += len(block)
            s.shutdown(socket.SHUT_WR)
            print("uploaded", sent > 0, "closed", s.recv(1) == b"")
        else:
            total = 0
            while True:
                data = s.recv(1 << 20)
                if not data: break
                total += len(data)
            print("downloaded", total)
        """#

    final class Server: Sendable {
        let listener: LoopbackListener
        var port: Int { listener.port }

        init(_ server: SpeedtestServer = SpeedtestServer()) async throws {
            listener = try await LoopbackListener { channel in server.serve(channel) }
        }

        func run(_ request: String, uploadSeconds: Double = 0) async -> [String] {
            let outcome = await ChildProgram.run(["python3", "-c", SpeedtestSocketTests.client, "\(port)", request, "\(uploadSeconds)"], stderrToStdout: true)
            return outcome.stdout.split(separator: "\n").map(String.init)
        }
    }

    @Test func downloadWritesWholeBlocksUntilTheTimeThenCloses() async throws {
        // The agent's own drain grace: on a busy host the client reads the last block more
        // slowly than in five seconds, and the agent waits for it while it moves.
        let server = try await Server()
        defer { Task { await server.listener.close() } }
        let lines = await server.run(#"{"version":2,"time":300000000,"direction":0}"# + "\n")
        #expect(lines.first == "answer {}", "\(lines)")
        let total = Int(lines.last?.split(separator: " ").last ?? "") ?? -1
        #expect(total >= 2 << 20 && total % (2 << 20) == 0, "\(lines)")
    }

    @Test func uploadReadsUntilTheClientsEOFThenCloses() async throws {
        let server = try await Server()
        defer { Task { await server.listener.close() } }
        let lines = await server.run(#"{"version":2,"time":20000000000,"direction":1}"# + "\n", uploadSeconds: 0.3)
        #expect(lines == ["answer {}", "uploaded True closed True"], "\(lines)")
    }

    @Test func badRequestsGetTheErrorLineAndTheClose() async throws {
        let server = try await Server()
        defer { Task { await server.listener.close() } }
        let old = await server.run(#"{"version":1,"time":1,"direction":0}"# + "\n")
        #expect(old == [#"answer {"error":"version mismatch! Server is version 2, client is version 1"}"#, "downloaded 0"], "\(old)")
        let long = await server.run("{\"pad\":\"" + String(repeating: "a", count: 5000) + "\"}")
        #expect(long == [#"answer {"error":"speedtest request longer than 4096 bytes"}"#, "downloaded 0"], "\(long)")
    }

    @Test func aClientThatSendsNothingIsClosedAfterTheRequestTimeout() async throws {
        let server = try await Server(SpeedtestServer(requestTimeout: .milliseconds(200)))
        defer { Task { await server.listener.close() } }
        let lines = await server.run("")
        #expect(lines == ["answer ", "downloaded 0"], "\(lines)")
    }
}
