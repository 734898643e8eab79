import AgentCore
import AgentTestSupport
import Foundation
import Logging
@testable import ReconnectingPTY
import Testing

/// The screen backend with Debian's GNU screen (the Makefile installs it): each test gives
/// the server a screen directory of its own, so `screen -ls` with that `SCREENDIR` sees the
/// test's sessions and nobody else's.
@Suite(.timeLimit(.minutes(3)), .enabled(if: ExecutableLookup.find("screen", path: ProcessInfo.processInfo.environment["PATH"]) != nil))
struct ScreenBackendTests {
    final class Server: Sendable {
        let server: ReconnectingPTYServer
        let listener: LoopbackListener
        let directory: String
        var port: Int { listener.port }
        var sockets: String { directory + "/sockets" }

        init(limits: ReconnectingPTYServer.Limits = .init()) async throws {
            // Short: screen's socket path (`<dir>/sockets/<pid>.<name>`) has a length limit.
            directory = try #require(String(validatingCString: mkdtemp(strdup("/tmp/scr-XXXXXX")))) + "/s"
            var limits = limits
            limits.screenDirectory = directory
            var environment = ProcessInfo.processInfo.environment
            environment["PS1"] = "$ "
            environment["SHELL"] = "/bin/sh"
            let server = ReconnectingPTYServer(
                manifest: ManifestStore(), environment: environment, limits: limits,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            self.server = server
            listener = try await LoopbackListener { channel in server.serve(channel) }
        }

        func stop() async {
            await server.shutdown()
            await listener.close()
            let names = await sessionNames()
            #expect(names.isEmpty || names == ["foreign1"], "the agent's screen sessions outlived its shutdown: \(names)")
            // Whatever a failed test left: the test's own directory's sessions only.
            _ = await ChildProgram.run(["sh", "-c", "screen -ls | awk '/\\t[0-9]+\\./ {print $1}' | xargs -r -n1 -I{} screen -S {} -X quit"], environment: ["SCREENDIR": sockets])
            try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent)
        }

        /// A connection that has sent its init, asking for screen.
        func attach(_ id: String, command: String = "", rows: UInt16 = 24, columns: UInt16 = 80, backend: String = "screen") async throws -> LoopbackSocket {
            let socket = try #require(await LoopbackSocket.connect(port: port))
            #expect(socket.send(PTYInit(id: id, height: rows, width: columns, command: command, backendType: backend).frameBytes))
            return socket
        }

        /// `screen -ls` in the test's `SCREENDIR`.
        func sessionList() async -> String {
            await ChildProgram.run(["screen", "-ls"], environment: ["SCREENDIR": sockets]).stdout
        }

        /// The names of the test's live screen sessions (`<pid>.<name>` lines).
        func sessionNames() async -> [String] {
            // Screen ends some lines with CR LF (one Character in Swift).
            await sessionList().split(whereSeparator: \.isNewline).compactMap { line in
                let field = line.split(separator: "\t").first.map(String.init) ?? ""
                guard let dot = field.firstIndex(of: "."), Int(field[..<dot]) != nil else { return nil }
                return String(field[field.index(after: dot)...])
            }
        }
    }

    static func type(_ socket: LoopbackSocket, _ text: String) {
        #expect(socket.send("{\"data\":\(jsonQuote(text))}"))
    }

    func hangUp(_ socket: LoopbackSocket) {
        _ = shutdown(socket.fd, Int32(SHUT_RDWR))
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func attachTypeDetachAndReattachSeesScreensRedraw() async throws {
        let server = try await Server()
        let id = UUID().uuidString
        let first = try await server.attach(id)
        Self.type(first, "echo one-$((40+2))\r")
        let one = Self.text(await first.read(until: "one-42", timeout: .seconds(60)))
        #expect(one.contains("one-42"), "\(one)")
        let names = await server.sessionNames()
        #expect(names.count == 1 && names.first?.count == 8 && names.first?.allSatisfy(\.isHexDigit) == true, "\(names)")
        hangUp(first)

        // Reattached (its command ignored): screen redraws the window with the earlier
        // output; the session is the same one.
        let second = try await server.attach(id, command: "echo never-$((1+1))")
        let redraw = Self.text(await second.read(until: "one-42", timeout: .seconds(60)))
        #expect(redraw.contains("one-42"), "\(redraw)")
        Self.type(second, "echo two-$((1+1))\r")
        let live = Self.text(await second.read(until: "two-2", timeout: .seconds(60)))
        #expect(live.contains("two-2") && !live.contains("never-2"), "\(live)")
        hangUp(second)

        // A reattach at another size: the client's terminal has the init's size, which
        // screen gives the window (a smaller one pushes the top lines into screen's own
        // scrollback, as screen does).
        // The hang-up killed that client alone: screen lists the session as detached.
        let detached = await eventually(timeout: .seconds(60)) { await server.sessionList().contains("(Detached)") }
        let listing = await server.sessionList()
        #expect(detached, "\(listing)")
        let third = try await server.attach(id, rows: 30, columns: 90)
        Self.type(third, "echo three-$((1+2))\r")
        let attached = Self.text(await third.read(until: "three-3", timeout: .seconds(60)))
        #expect(attached.contains("three-3"), "\(attached)")
        // Screen passes the size on by itself, once the earlier client is gone: asked again
        // (with the size said again, as a browser's resize does) until the shell sees it.
        var sized = ""
        for _ in 0..<12 where !sized.contains("30 90") {
            #expect(third.send(#"{"height":30,"width":90}"#))
            Self.type(third, "stty size\r")
            sized = Self.text(await third.read(until: "30 90", timeout: .seconds(5)))
        }
        #expect(sized.contains("30 90"), "\(sized)")
        #expect(await server.sessionNames() == names)
        #expect(server.server.count == 1)
        await server.stop()
    }

    @Test func aResizeObjectResizesTheWindow() async throws {
        let server = try await Server()
        let socket = try await server.attach(UUID().uuidString)
        Self.type(socket, "echo up-$((1+1))\r")
        _ = await socket.read(until: "up-2", timeout: .seconds(60))
        #expect(socket.send(#"{"height":33,"width":101}"#))
        // Screen passes the size on to the window by itself, after the client's SIGWINCH:
        // asked again until the shell sees it (bounded).
        var size = ""
        for _ in 0..<12 where !size.contains("33 101") {
            Self.type(socket, "stty size\r")
            size = Self.text(await socket.read(until: "33 101", timeout: .seconds(5)))
        }
        #expect(size.contains("33 101"), "\(size)")
        await server.stop()
    }

    @Test func twoAttachmentsAtOnceShareTheWindow() async throws {
        let server = try await Server()
        let id = UUID().uuidString
        let first = try await server.attach(id)
        let second = try await server.attach(id)
        Self.type(first, "echo from-first-$((2+3))\r")
        #expect(Self.text(await second.read(until: "from-first-5", timeout: .seconds(60))).contains("from-first-5"))
        #expect(Self.text(await first.read(until: "from-first-5", timeout: .seconds(60))).contains("from-first-5"))
        Self.type(second, "echo from-second-$((3+4))\r")
        #expect(Self.text(await first.read(until: "from-second-7", timeout: .seconds(60))).contains("from-second-7"))
        // Serialised attaches started one session, not two under the same name.
        #expect(await server.sessionNames().count == 1)
        // One connection's end kills only its client: the other goes on.
        hangUp(first)
        Self.type(second, "echo still-$((4+4))\r")
        #expect(Self.text(await second.read(until: "still-8", timeout: .seconds(60))).contains("still-8"))
        await server.stop()
    }

    @Test func theCommandsExitClosesTheConnectionAndForgetsTheID() async throws {
        let server = try await Server()
        let id = UUID().uuidString
        let socket = try await server.attach(id)
        Self.type(socket, "echo ready-$((1+2))\r")
        _ = await socket.read(until: "ready-3", timeout: .seconds(60))
        Self.type(socket, "exit\r")
        #expect(await socket.isClosedByPeer(within: .seconds(60)))
        #expect(await eventually(timeout: .seconds(60)) { server.server.count == 0 })
        #expect(await server.sessionNames().isEmpty)
        await server.stop()
    }

    @Test func theIdleTimeoutQuitsTheScreenSession() async throws {
        let clock = ManualClock()
        var limits = ReconnectingPTYServer.Limits()
        limits.sleep = { try await clock.sleep(for: $0) }
        let server = try await Server(limits: limits)
        let socket = try await server.attach(UUID().uuidString, command: "echo started; exec sleep 600")
        _ = await socket.read(until: "started", timeout: .seconds(60))
        #expect(await server.sessionNames().count == 1)
        // Attached, no timer sleeps (the attach timer was cancelled); detaching arms the idle one.
        #expect(await eventually { clock.sleeping == 0 })
        hangUp(socket)
        #expect(await eventually { clock.sleeping == 1 })
        #expect(await server.sessionNames().count == 1)
        clock.advance(by: .seconds(300))
        #expect(await eventually(timeout: .seconds(60)) { server.server.count == 0 })
        #expect(await eventually(timeout: .seconds(60)) { await server.sessionNames().isEmpty })
        #expect(clock.sleeping == 0)
        await server.stop()
    }

    @Test func shutdownQuitsOnlyTheAgentsSessions() async throws {
        let server = try await Server()
        let socket = try await server.attach(UUID().uuidString)
        Self.type(socket, "echo up-$((2+2))\r")
        _ = await socket.read(until: "up-4", timeout: .seconds(60))
        // A session the agent did not create, in the same directory: it must survive.
        let foreign = await ChildProgram.run(
            ["sh", "-c", "screen -dmS foreign1 sleep 600 </dev/null >/dev/null 2>&1"], environment: ["SCREENDIR": server.sockets])
        #expect(foreign.status == 0)
        #expect(await eventually(timeout: .seconds(60)) { await server.sessionNames().count == 2 })

        await server.server.shutdown()
        #expect(await socket.isClosedByPeer(within: .seconds(60)))
        #expect(server.server.count == 0)
        // Screen removes a quit session's socket as it exits.
        let left = await eventually(timeout: .seconds(60)) { await server.sessionNames() == ["foreign1"] }
        let list = await server.sessionList()
        #expect(left, "\(list)")
        _ = await ChildProgram.run(["screen", "-S", "foreign1", "-X", "quit"], environment: ["SCREENDIR": server.sockets])
        await server.stop()
    }

    @Test func theDirectoryIsTheAgentsOwnAndTheConfigIsTheReferences() async throws {
        let base = try #require(String(validatingCString: mkdtemp(strdup("/tmp/scr-XXXXXX"))))
        defer { try? FileManager.default.removeItem(atPath: base) }
        let directory = ScreenDirectory(base: base + "/coder-screen")
        try directory.prepare()
        #expect(FileInfo.of(path: directory.base)?.permissions == 0o700)
        #expect(FileInfo.of(path: directory.sockets)?.permissions == 0o700)
        let config = try String(contentsOfFile: directory.config, encoding: .utf8)
        let lines: [String] = config.split(separator: "\n").map { String($0) }
        #expect(lines == ScreenDirectory.settings)
        #expect(config.contains("escape ^Ss") && config.contains("term xterm-256color"))
        // A link where the directory should be is refused (the buffered backend serves then).
        let linked = ScreenDirectory(base: base + "/link")
        #expect(symlink(base + "/coder-screen", linked.base) == 0)
        #expect(throws: ScreenDirectory.SetupError.self) { try linked.prepare() }
        #expect(ScreenDirectory.defaultBase(environment: ["TMPDIR": "/var/tmp/"]) == "/var/tmp/coder-screen")
        #expect(ScreenDirectory.defaultBase(environment: [:]) == "/tmp/coder-screen")
    }
}

/// Which backend serves a session, and how screen's commands are retried: plain values.
struct ScreenBackendChoiceTests {
    @Test func theBackendTypePicksTheBackend() {
        #expect(PTYBackend.choose(requested: "", screenPath: "/usr/bin/screen") == (.screen("/usr/bin/screen"), nil))
        #expect(PTYBackend.choose(requested: "", screenPath: nil) == (.buffered, nil))
        #expect(PTYBackend.choose(requested: "screen", screenPath: "/usr/bin/screen") == (.screen("/usr/bin/screen"), nil))
        let fallback = PTYBackend.choose(requested: "screen", screenPath: nil)
        #expect(fallback.backend == .buffered && fallback.note?.contains("not on the agent's PATH") == true)
        #expect(PTYBackend.choose(requested: "buffered", screenPath: "/usr/bin/screen") == (.buffered, nil))
        #expect(PTYBackend.choose(requested: "tmux", screenPath: "/usr/bin/screen") == (.buffered, nil))
    }

    @Test func aCommandIsRetriedEvery250msFor30s() {
        var poll = ScreenCommandPoll()
        var retries = 0
        while case .retry(let pause) = poll.failed() {
            #expect(pause == .milliseconds(250))
            retries += 1
            if retries > 1000 { break }
        }
        #expect(retries == 120 && poll.waited == .seconds(30))
        #expect(poll.failed() == .giveUp)
    }

    @Test func screenNamesAreEightHexCharacters() {
        for _ in 0..<100 {
            let name = ReconnectingPTYServer.screenName()
            #expect(name.count == 8 && name.allSatisfy(\.isHexDigit))
        }
    }
}
