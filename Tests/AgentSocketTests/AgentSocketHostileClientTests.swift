import AgentCore
import AgentProto
import AgentSocket
import AgentTestSupport
import Foundation
import Logging
import SwiftProtobuf
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Clients that misbehave are disconnected with a log line and never affect others.
@Suite(.timeLimit(.minutes(3)))
struct AgentSocketHostileClientTests {
    static let ping = unaryFrames("/coder.agentsocket.v1.AgentSocket/Ping", [])

    @Test func garbageBytesDisconnectOnlyTheirClient() async throws {
        let logs = CapturedLog()
        try await withSocketServer(logger: logs.logger) { client, _ in
            let bad = try #require(LoopbackSocket(unixPath: client.path))
            // Kind 0x3F is not a dRPC kind: a protocol error.
            bad.send([0x7F, 0x01, 0x01, 0x03, 0x41, 0x42, 0x43] + Array(repeating: 0xFF, count: 64))
            let (_, closed) = await bad.readAll(timeout: .seconds(20))
            #expect(closed, "the agent closes the connection")
            try await client.ping()
            #expect(await eventually { logs.contains("broke the protocol") })
        }
    }

    @Test func halfAFrameThenSilenceIsCutAtTheDeadline() async throws {
        let logs = CapturedLog()
        try await withSocketServer(configure: { $0.partialFrameTimeout = .milliseconds(300) }, logger: logs.logger) { client, _ in
            let idle = try #require(LoopbackSocket(unixPath: client.path))
            let half = try #require(LoopbackSocket(unixPath: client.path))
            half.send(Array(Self.ping.prefix(5)))
            let (_, closed) = await half.readAll(timeout: .seconds(20))
            #expect(closed, "half a frame then nothing: disconnected")
            #expect(await eventually { logs.contains("part of a frame") })
            // A client that sent nothing at all is not cut by the frame deadline.
            idle.send(Self.ping)
            let answer = await idle.read(atLeast: 8)
            #expect(answer.first == 0x05, "an idle connection still works: \(answer)")
        }
    }

    /// The deadline runs from the frame's first byte: a client that trickles a byte at a
    /// time, well within the timeout each, is still cut (as on the boundary socket).
    @Test func aTrickledFrameIsCutAtTheDeadlineFromItsFirstByte() async throws {
        try await withSocketServer(configure: { $0.partialFrameTimeout = .milliseconds(300) }) { client, _ in
            let trickle = try #require(LoopbackSocket(unixPath: client.path))
            // An Invoke frame announcing a 1000-byte method name: mid-frame for 1000 bytes.
            let frame: [UInt8] = [0x03, 0x01, 0x01] + varint(1000) + Array(repeating: 0x41, count: 1000)
            var closed = false
            // At most 200 turns of at least 100 ms: bounded whatever the host's load.
            for byte in frame.prefix(200) {
                guard trickle.send([byte]) else {
                    closed = true
                    break
                }
                if await trickle.readAll(timeout: .milliseconds(100)).closed {
                    closed = true
                    break
                }
            }
            #expect(closed, "a trickled frame is disconnected")
            try await client.ping()
        }
    }

    @Test func oversizedFrameIsRefused() async throws {
        try await withSocketServer { client, _ in
            let big = try #require(LoopbackSocket(unixPath: client.path))
            let method = Array("/coder.agentsocket.v1.AgentSocket/Ping".utf8)
            // Invoke, then a Message frame announcing 4 MiB + 1.
            big.send([0x03, 0x01, 0x01] + varint(method.count) + method + [0x05, 0x01, 0x02] + varint((4 << 20) + 1) + Array(repeating: 0, count: 1024))
            let (_, closed) = await big.readAll(timeout: .seconds(20))
            #expect(closed)
            try await client.ping()
        }
    }

    @Test func vanishingAndSilentClientsCannotLockOthersOut() async throws {
        try await withSocketServer(configure: { $0.maxConnections = 8 }) { client, server in
            for _ in 0..<5 {
                let vanishing = try #require(LoopbackSocket(unixPath: client.path))
                vanishing.send(Array(Self.ping.prefix(20)))
            }
            // Twenty clients that connect and say nothing: the quietest make room.
            let silent = (0..<20).compactMap { _ in LoopbackSocket(unixPath: client.path) }
            #expect(silent.count == 20)
            // Once they are accepted (the cap holds), a new client still gets through. On a
            // loaded host silent clients still in the backlog can be accepted after it and
            // make it the quietest: like any client, it connects again (bounded).
            #expect(await eventually { server.connectionCount == 8 })
            var answered = false
            for _ in 0..<5 where !answered {
                answered = (try? await client.ping()) != nil
            }
            #expect(answered)
            #expect(server.connectionCount <= 8)
            _ = silent.count
        }
    }

    /// A client that holds a waiting call and floods its stream cannot hold the agent's
    /// shutdown: closing the connection ends the serving task and the wait.
    @Test func aStuckStreamingCallCannotHoldShutdown() async throws {
        try await withSocketServer { client, _ in
            try await client.syncWant("never", dependsOn: "missing")
            let stuck = try #require(LoopbackSocket(unixPath: client.path))
            let method = Array("/coder.agentsocket.v1.AgentSocket/SyncWaitReady".utf8)
            var request = Coder_Agentsocket_V1_SyncReadyRequest()
            request.unit = "never"
            let body: [UInt8] = try request.serializedBytes()
            var frames: [UInt8] = [0x03, 0x01, 0x01] + varint(method.count) + method
            // Three messages and no CloseSend: the handler takes one and then waits.
            for message in 2...4 { frames += [0x05, 0x01, UInt8(message)] + varint(body.count) + body }
            stuck.send(frames)
            let superseding = try #require(LoopbackSocket(unixPath: client.path))
            superseding.send([0x03, 0x01, 0x01] + varint(method.count) + method + [0x05, 0x01, 0x02] + varint(body.count) + body)
            superseding.send(unaryFrames("/coder.agentsocket.v1.AgentSocket/Ping", [], stream: 2))
            try await Task.sleep(for: .milliseconds(200))
            try await client.ping()
        }
        // Reaching here means the server's graceful shutdown ended.
    }

    /// A client that pipelines calls and reads none of the answers holds its call (busy, so
    /// a full registry refuses everyone else) only until an answer has waited the write
    /// timeout for room: then it is disconnected and others get through.
    @Test func aClientThatReadsNoAnswersIsCutAtTheWriteDeadline() async throws {
        try await withSocketServer(configure: {
            $0.maxConnections = 1
            $0.writeTimeout = .milliseconds(500)
        }) { client, server in
            let flood = try #require(LoopbackSocket(unixPath: client.path))
            var stream: UInt64 = 0
            // Pipelined until the agent stops reading (its answers wait for room) and this
            // send times out or the agent closes: at most 100 batches of 2 000 calls.
            for _ in 0..<100 {
                var frames: [UInt8] = []
                for _ in 0..<2000 {
                    stream += 1
                    frames += unaryFrames("/coder.agentsocket.v1.AgentSocket/Ping", [], stream: stream)
                }
                let batch = frames
                guard await onThread({ flood.send(batch) }) else { break }
            }
            #expect(await eventually(timeout: .seconds(60)) { server.connectionCount == 0 })
            try await client.ping()
        }
    }

    /// The cap never closes a client that is waiting in a call; idle ones make room.
    @Test func waitingClientsAreNotEvicted() async throws {
        try await withSocketServer(configure: { $0.maxConnections = 4 }) { client, server in
            try await client.syncWant("a", dependsOn: "gate")
            try await client.syncWant("b", dependsOn: "gate")
            let waiters = [Task { try await client.waitReady("a") }, Task { try await client.waitReady("b") }]
            #expect(await eventually { server.busyConnectionCount == 2 })
            let silent = (0..<10).compactMap { _ in LoopbackSocket(unixPath: client.path) }
            // All silent ones admitted (each admission closes the quietest idle one, so all
            // but the last two are closed) before the next call connects: admissions run on
            // the connections' own loops, and one still queued could take the call's place.
            #expect(
                await eventually {
                    var closed = 0
                    for socket in silent where await socket.isClosedByPeer(within: .milliseconds(1)) { closed += 1 }
                    return closed >= silent.count - 2
                })
            #expect(server.connectionCount <= 4)
            try await Task.sleep(for: .milliseconds(100))
            try await client.syncStart("gate")
            try await client.syncComplete("gate")
            for waiter in waiters { try await waiter.value }
            _ = silent.count
        }
    }

    @Test func standaloneAppStatusIsNotReportedAsQueued() async throws {
        try await withSocketServer { client, _ in
            var request = Coder_Agent_V2_UpdateAppStatusRequest()
            request.slug = "app"
            request.message = "working"
            let queued = try await client.updateAppStatus(request)
            #expect(!queued)
        }
    }

    /// Beyond the reference: a client of another user is refused even when the socket's
    /// mode would let it in.
    @Test func aClientOfAnotherUserIsRefused() async throws {
        guard geteuid() == 0 else {
            print("skipped: the test needs root to run a client as another user")
            return
        }
        // Debian's python3 (the Makefile installs it): another user can run it.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
        else {
            print("skipped: /usr/bin/setpriv or /usr/bin/python3 is missing")
            return
        }
        let logs = CapturedLog()
        let directory = try socketDirectory()
        chmod(directory, 0o755)
        try await withSocketServer(path: directory + "/agent.sock", logger: logs.logger) { client, _ in
            // Widen the mode by hand, so that only the peer check stands in the way.
            chmod(client.path, 0o666)
            let script = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sys.argv[1])
                data = b""
                try:
                    s.sendall(bytes.fromhex(sys.argv[2]))
                    s.settimeout(60)
                    while True:
                        chunk = s.recv(4096)
                        if not chunk: break
                        data += chunk
                except (BrokenPipeError, ConnectionResetError):
                    pass
                print(len(data))
                """
            let hex = Self.ping.map { String(format: "%02x", $0) }.joined()
            let output = try await runProcess(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, client.path, hex])
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "no answer for another user: \(output)")
            #expect(await eventually { logs.contains("refused a client of another user") })
            try await client.ping()
        }
    }
}

/// Runs a program to completion (bounded by ``ChildProgram/defaultTimeout``); returns its stdout.
func runProcess(_ path: String, _ arguments: [String]) async throws -> String {
    let outcome = await ChildProgram.run([path] + arguments, stderrToStdout: true)
    return outcome.status == -1 ? "cannot run \(path)" : outcome.stdout
}
