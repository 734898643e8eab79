@testable import AgentSSH
import AgentTestSupport
import Foundation
import NIOCore
import Testing

/// OpenSSH's client rekeying every megabyte (`RekeyLimit=1M`) while 32 MiB cross the
/// connection: a download, an upload, both at once, and a `-L` forward. swift-nio-ssh refuses
/// channel messages from the client's KEXINIT until its own NEWKEYS, so without
/// ``SSHRekeyGate`` bytes written in that span were lost and the transfer stalled or ended short.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct SSHRekeyTests {
    static let size = 32 << 20

    /// A scratch directory with `source`: `size` random bytes.
    static func scratch() async throws -> String {
        let directory = try SSHExtensionTests.scratch("ssh-rekey")
        let made = await ChildProgram.run(["sh", "-c", "head -c \(size) /dev/urandom > '\(directory)/source'"], stderrToStdout: true)
        #expect(made.status == 0, "\(made)")
        return directory
    }

    /// `ssh` rekeying every megabyte, its debug log in `directory/log`, with `redirections`
    /// applied by the shell; returns its outcome and how many key exchanges it finished.
    static func ssh(port: Int, _ command: String, directory: String, extra: [String] = [], redirections: String) async -> (ChildProgram.Outcome, Int) {
        let options = [
            "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=60", "-o", "RekeyLimit=1M", "-v", "-E", "\(directory)/log",
        ]
        let arguments = (options + extra)
            .map { "'\($0)'" }.joined(separator: " ")
        let remote = command.isEmpty ? "" : "'\(command)'"
        let outcome = await ChildProgram.run(
            ["sh", "-c", "ssh \(arguments) -p \(port) 127.0.0.1 \(remote) \(redirections)"], stderrToStdout: true, timeout: .seconds(120))
        let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
        let rekeys = log.components(separatedBy: "SSH2_MSG_NEWKEYS received").count - 2
        return (outcome, rekeys)
    }

    static func same(_ one: String, _ other: String) async -> Bool {
        await ChildProgram.run(["cmp", one, other], stderrToStdout: true).status == 0
    }

    @Test func downloadAcrossRekeysArrivesWhole() async throws {
        let directory = try await Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let (outcome, rekeys) = await Self.ssh(
            port: server.port, "cat \(directory)/source", directory: directory, redirections: "> '\(directory)/down'")
        #expect(outcome.status == 0, "\(outcome)")
        #expect(rekeys >= 8, "only \(rekeys) key exchanges")
        #expect(await Self.same(directory + "/source", directory + "/down"))
    }

    @Test func uploadAcrossRekeysArrivesWhole() async throws {
        let directory = try await Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let (outcome, rekeys) = await Self.ssh(
            port: server.port, "cat > \(directory)/up", directory: directory, redirections: "< '\(directory)/source'")
        #expect(outcome.status == 0, "\(outcome)")
        #expect(rekeys >= 8, "only \(rekeys) key exchanges")
        #expect(await Self.same(directory + "/source", directory + "/up"))
    }

    @Test func bothWaysAtOnceAcrossRekeys() async throws {
        let directory = try await Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let (outcome, rekeys) = await Self.ssh(
            port: server.port, "cat \(directory)/source & cat > \(directory)/up; wait", directory: directory,
            redirections: "< '\(directory)/source' > '\(directory)/down'")
        #expect(outcome.status == 0, "\(outcome)")
        #expect(rekeys >= 8, "only \(rekeys) key exchanges")
        #expect(await Self.same(directory + "/source", directory + "/down"))
        #expect(await Self.same(directory + "/source", directory + "/up"))
    }

    /// A forward's bytes (`ssh -W` to an echo server) go through ``ChannelGlue``, not a session.
    @Test func forwardBothWaysAcrossRekeys() async throws {
        let directory = try await Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let echo = try await LoopbackListener { channel in
            channel.setOption(ChannelOptions.allowRemoteHalfClosure, value: true).flatMapThrowing {
                try channel.pipeline.syncOperations.addHandler(HalfClosingEcho())
            }
        }
        defer { Task { await echo.close() } }
        let (outcome, rekeys) = await Self.ssh(
            port: server.port, "", directory: directory, extra: ["-W", "127.0.0.1:\(echo.port)"],
            redirections: "< '\(directory)/source' > '\(directory)/down'")
        #expect(outcome.status == 0, "\(outcome)")
        #expect(rekeys >= 8, "only \(rekeys) key exchanges")
        #expect(await Self.same(directory + "/source", directory + "/down"))
    }

    /// Echoes what it reads, and ends its output after the last byte when its input ends.
    final class HalfClosingEcho: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.writeAndFlush(data, promise: nil) }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            guard case ChannelEvent.inputClosed = event else { return }
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0))).whenComplete { _ in
                bound.value.close(mode: .output, promise: nil)
            }
        }
    }
}
