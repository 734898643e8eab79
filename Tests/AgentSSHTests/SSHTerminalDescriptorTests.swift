@testable import AgentSSH
import AgentSystem
import AgentTestSupport
import Foundation
import NIOCore
import NIOSSH
import Testing

/// A session's terminal descriptor: the client's modes are in place before its command
/// runs, and once the terminal's relay has closed the descriptor, a `window-change` reaches
/// no descriptor that took its number.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SSHTerminalDescriptorTests {
    /// Asks for a terminal with `modes` and runs `command` in it.
    static func startInTerminal(
        _ server: SSHSessionTests.Server, _ command: String, modes: [SSHTerminalModes.Opcode: SSHTerminalModes.OpcodeValue] = [:]
    ) async throws -> (SSHTestClient, SSHTestChannel) {
        let client = try await SSHTestClient.connect(port: server.port)
        let session = try await client.open()
        let terminal = SSHChannelRequestEvent.PseudoTerminalRequest(
            wantReply: true, term: "xterm", terminalCharacterWidth: 80, terminalRowHeight: 24, terminalPixelWidth: 0,
            terminalPixelHeight: 0, terminalModes: SSHTerminalModes(modes))
        session.channel.triggerUserOutboundEvent(terminal, promise: nil)
        session.exec(command)
        return (client, session)
    }

    @Test func theClientsModesAreSetBeforeTheCommandRuns() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        // ECHO and ICANON off, ^G as the interrupt character (RFC 4254's opcodes 53, 51, 1).
        let (client, session) = try await Self.startInTerminal(
            server, "stty -a", modes: [.init(rawValue: 53): .init(rawValue: 0), .init(rawValue: 51): .init(rawValue: 0), .init(rawValue: 1): .init(rawValue: 7)])
        defer { Task { await client.close() } }
        #expect(await session.waitForClose(), "\(session.events)")
        #expect(session.events.contains(.exitStatus(0)), "\(session.events)")
        let settings = session.stdout
        #expect(settings.contains("-echo ") && settings.contains("-icanon") && settings.contains("intr = ^G"), "\(settings)")
    }

    /// Once told, the command closes its terminal (the relay reads EIO and closes the primary side)
    /// and, ignoring the hangup that follows, lives on; the descriptor's number is then taken by copies of a terminal of the
    /// test's own, and a `window-change` for the session must leave that terminal's size alone.
    @Test func aWindowChangeAfterTheTerminalClosedReachesNoOtherDescriptor() async throws {
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let (client, session) = try await Self.startInTerminal(server, "tty; read go; trap '' HUP; exec </dev/null >/dev/null 2>&1; exec sleep 120")
        defer { Task { await client.close() } }
        #expect(await session.wait { _ in session.stdout.contains("\n") }, "\(session.events)")
        let tty = session.stdout.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        #expect(tty.hasPrefix("/dev/pts/"), "\(session.stdout)")
        let primary = try #require(Self.primaryDescriptor(of: tty), "the session's terminal is not open in this process")
        session.write("go\n")
        #expect(await eventually(timeout: .seconds(60)) { !Self.isPrimary(primary, of: tty) }, "the relay never closed the terminal")

        let own = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        try #require(own >= 0)
        defer { close(own) }
        var size = winsize(ws_row: 10, ws_col: 10, ws_xpixel: 0, ws_ypixel: 0)
        try #require(ioctl(own, UInt(TIOCSWINSZ), &size) == 0)
        // Every free number up to the closed one's is now a copy of that terminal (bounded).
        var copies: [Int32] = []
        defer { for copy in copies { close(copy) } }
        while copies.count < 65_536 {
            let copy = fcntl(own, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { break }
            copies.append(copy)
            if copy >= primary { break }
        }
        session.channel.triggerUserOutboundEvent(
            SSHChannelRequestEvent.WindowChangeRequest(terminalCharacterWidth: 200, terminalRowHeight: 50, terminalPixelWidth: 0, terminalPixelHeight: 0),
            promise: nil)
        // A request with a reply after it: the server has handled the window-change once the
        // reply is here (an `env` after the start is refused).
        let failures = session.events.filter { $0 == .failure }.count
        session.channel.triggerUserOutboundEvent(SSHChannelRequestEvent.EnvironmentRequest(wantReply: true, name: "LANG", value: "C"), promise: nil)
        #expect(await session.wait { $0.filter { $0 == .failure }.count > failures }, "\(session.events)")
        var now = winsize()
        #expect(ioctl(own, UInt(TIOCGWINSZ), &now) == 0)
        #expect(now.ws_row == 10 && now.ws_col == 10, "rows \(now.ws_row), columns \(now.ws_col)")
    }

    /// This process's descriptor for the primary side of `tty` (`/dev/pts/N`).
    static func primaryDescriptor(of tty: String) -> Int32? {
        let numbers = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.compactMap { Int32($0) } ?? []
        return numbers.first { isPrimary($0, of: tty) }
    }

    static func isPrimary(_ descriptor: Int32, of tty: String) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")) == "/dev/ptmx"
            && SessionProcess.terminalName(descriptor) == tty
    }
}
