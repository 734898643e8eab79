import AgentTestSupport
import Foundation
import Testing

/// The desktop in the real binary: a model's action sequence end to end with no helper
/// processes, a viewer that stops reading without growing the agent's memory, and the
/// agent's Xvnc ended with the agent.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct WorkspaceAgentDesktopTests {
    static func xvncChildren(of agent: pid_t) -> [pid_t] {
        processes(named: "Xvnc", sessionLeaderOnly: false).filter { isDescendant($0, of: agent) }
    }

    @Test func aModelsActionSequenceAndShutdown() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        for body in [
            #"{"action":"screenshot","scaled_width":1280,"scaled_height":720}"#,
            #"{"action":"left_click","coordinate":[640,360],"scaled_width":1280,"scaled_height":720}"#,
            #"{"action":"type","text":"hello world"}"#,
            #"{"action":"key","text":"ctrl+a"}"#,
            #"{"action":"scroll","coordinate":[100,100],"scroll_direction":"down","scroll_amount":3}"#,
            #"{"action":"left_click_drag","start_coordinate":[10,10],"coordinate":[200,200]}"#,
            #"{"action":"cursor_position","scaled_width":1280,"scaled_height":720}"#,
        ] {
            let response = try await client.request("POST", "/api/v0/desktop/action", json: body)
            #expect(response.status == 200, "\(body): \(response.bodyText)")
        }
        let position = try await client.request(
            "POST", "/api/v0/desktop/action", json: #"{"action":"cursor_position","scaled_width":1280,"scaled_height":720}"#)
        #expect(jsonObject(position.body)?["output"] as? String == "x=133,y=133")
        let xvnc = Self.xvncChildren(of: agent.pid)
        #expect(xvnc.count == 1, "one Xvnc, the agent's own; no other helper")
        agent.signal(SIGTERM)
        #expect(await agent.exitStatus() == 0)
        #expect(xvnc.allSatisfy { kill($0, 0) != 0 }, "Xvnc ended with the agent")
    }

    /// A viewer asks for full 1920×1080 updates (8 MiB each, raw) and never reads: the
    /// bridge stops reading from Xvnc once the viewer's socket is full.
    @Test func aViewerThatStopsReadingDoesNotGrowTheAgent() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let client = RawHTTPClient(port: port)
        // Start the desktop first, so its memory is not counted as the viewer's.
        #expect(try await client.request("POST", "/api/v0/desktop/action", json: #"{"action":"cursor_position"}"#).status == 200)
        try await Task.sleep(for: .milliseconds(300))
        // Anonymous memory: the start-up page release (2 s after start) and the file pages
        // the bridge's first use faults back in would otherwise move the figure either way.
        let before = rssAnon(agent.pid)
        let socket = try #require(await LoopbackSocket.connect(port: port))
        socket.setReceiveBuffer(4096)
        socket.send(String.webSocketHandshake("/api/v0/desktop/vnc"))
        func frame(_ payload: [UInt8]) -> [UInt8] {
            let key: [UInt8] = [1, 2, 3, 4]
            return [0x82, 0x80 | UInt8(payload.count)] + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        }
        // Version, security None, ClientInit (shared): sent blind, the server reads them in turn.
        socket.send(frame(Array("RFB 003.008\n".utf8)) + frame([1]) + frame([1]))
        var peak = before
        for _ in 0..<40 {
            socket.send(frame([3, 0, 0, 0, 0, 0, 0x07, 0x80, 0x04, 0x38]))
            peak = max(peak, rssAnon(agent.pid))
            try await Task.sleep(for: .milliseconds(100))
        }
        print("stalled viewer: \(before >> 10) KiB before, peak +\((peak - before) >> 10) KiB while 40 full updates (320 MiB) were asked for")
        #expect(peak - before <= 24 << 20, "the stalled viewer grew the agent by more than 24 MiB")
    }

    /// libvncclient waits with select(2), which aborts the process on a descriptor at or
    /// above 1024 (FD_SETSIZE). With 1100 connections open to the agent, its VNC socket lands
    /// above that: actions must still work (a helper holds the connections, so this test
    /// process keeps few descriptors of its own).
    @Test func actionsWorkWhenTheAgentsVNCSocketIsAboveFDSetSize() async throws {
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"])
        defer { agent.cleanup() }
        let port = try await agent.port()
        let ready = NSTemporaryDirectory() + "fd-holder-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: ready) }
        let holder = try #require(
            ChildProgram.start([
                "python3", "-c",
                """
                import resource, socket, sys, time
                soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
                held = [socket.create_connection(("127.0.0.1", \(port))) for _ in range(1100)]
                open(sys.argv[1], "w").close()
                time.sleep(8)
                """, ready,
            ]))
        defer { holder.kill() }
        #expect(await eventually(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: ready) })
        let client = RawHTTPClient(port: port)
        let shot = try await client.request(
            "POST", "/api/v0/desktop/action", json: #"{"action":"screenshot","scaled_width":64,"scaled_height":36}"#)
        #expect(shot.status == 200)
        let click = try await client.request("POST", "/api/v0/desktop/action", json: #"{"action":"left_click","coordinate":[3,4]}"#)
        #expect(click.status == 200)
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(agent.pid)/fd"))?.compactMap { Int($0) } ?? []
        #expect((descriptors.max() ?? 0) >= 1024, "the agent's descriptors went above FD_SETSIZE")
        #expect(kill(agent.pid, 0) == 0, "the agent is alive")
    }
}

/// Processes started through the process API while the desktop runs get its
/// `DISPLAY` (over the agent's own), unless the request sets one; the desktop and the
/// process API share it only through AgentCore (`SessionEnvironment`), wired by the binary.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct WorkspaceAgentDesktopEnvironmentTests {
    @Test func processesStartedWhileTheDesktopRunsGetItsDisplay() async throws {
        // The agent's own DISPLAY names no server: a child must get the desktop's instead.
        let agent = try AgentDaemon.launch(["--http-address", "127.0.0.1:0"], environment: ["DISPLAY": ":4242"])
        defer { agent.cleanup() }
        let client = RawHTTPClient(port: try await agent.port())
        func output(_ body: String) async throws -> String {
            let started = try await client.request("POST", "/api/v0/processes/start", json: body)
            let id = try #require(jsonObject(started.body)?["id"] as? String, "\(started)")
            let finished = try await client.request("GET", "/api/v0/processes/\(id)/output?wait=true")
            return (jsonObject(finished.body)?["output"] as? String ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try await output(#"{"command":"echo $DISPLAY"}"#) == ":4242", "no desktop yet: the agent's own")

        #expect(try await client.request("POST", "/api/v0/desktop/action", json: #"{"action":"cursor_position"}"#).status == 200)
        let status = try await client.request("GET", "/api/v0/desktop")
        let display = try #require(jsonObject(status.body)?["display"] as? String, "\(status)")
        #expect(display.hasPrefix(":") && display != ":4242")
        #expect(try await output(#"{"command":"echo $DISPLAY"}"#) == display)
        // An X client started that way draws on the desktop.
        #expect(try await output(#"{"command":"xdotool getdisplaygeometry"}"#) == "1920 1080")
        #expect(try await output(#"{"command":"echo $DISPLAY","env":{"DISPLAY":":7"}}"#) == ":7", "the request's own wins")
    }
}
