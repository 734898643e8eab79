@testable import AgentSSH
import AgentTestSupport
import Foundation
import NIOCore
import Testing

/// OpenSSH's client rekeying every 256 KiB (`RekeyLimit=256K`) while 8 MiB cross the
/// connection: a download, an upload, both at once, and an `ssh -W` forward (whose bytes go
/// through ``ChannelGlue``, not a session). swift-nio-ssh refuses channel messages from the
/// client's KEXINIT until its own NEWKEYS, so without ``SSHRekeyGate`` bytes written in that
/// span were lost with their window and the transfer stalled or ended short.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct SSHRekeyTests {
    /// Small: the suite runs this beside the tunnel's own copies on a 2-core host.
    static let size = 8 << 20

    enum Transfer: String, CaseIterable, Sendable {
        case download, upload, bothWays, forward

        /// The remote command ("" for none), the client's extra options and its
        /// redirections, for scratch `directory` and an echo server on `echoPort`.
        func command(_ directory: String, echoPort: Int) -> (String, [String], String) {
            switch self {
            case .download: ("cat \(directory)/source", [], "> '\(directory)/down'")
            case .upload: ("cat > \(directory)/up", [], "< '\(directory)/source'")
            case .bothWays:
                ("cat \(directory)/source & cat > \(directory)/up; wait", [], "< '\(directory)/source' > '\(directory)/down'")
            case .forward: ("", ["-W", "127.0.0.1:\(echoPort)"], "< '\(directory)/source' > '\(directory)/down'")
            }
        }

        /// The files that must equal `source` afterwards.
        var outputs: [String] {
            switch self {
            case .download, .forward: ["down"]
            case .upload: ["up"]
            case .bothWays: ["down", "up"]
            }
        }
    }

    @Test(arguments: Transfer.allCases)
    func arrivesWholeAcrossRekeys(_ transfer: Transfer) async throws {
        let directory = try SSHExtensionTests.scratch("ssh-rekey")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let made = await ChildProgram.run(["sh", "-c", "head -c \(Self.size) /dev/urandom > '\(directory)/source'"], stderrToStdout: true)
        #expect(made.status == 0, "\(made)")
        let server = try await SSHSessionTests.Server()
        defer { Task { await server.stop() } }
        let echo = try await LoopbackListener { channel in
            channel.setOption(ChannelOptions.allowRemoteHalfClosure, value: true).flatMapThrowing {
                try channel.pipeline.syncOperations.addHandler(HalfClosingEcho())
            }
        }
        defer { Task { await echo.close() } }

        let (command, extra, redirections) = transfer.command(directory, echoPort: echo.port)
        let options = [
            "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=60", "-o", "RekeyLimit=256K", "-v", "-E", "\(directory)/log",
        ]
        let arguments = (options + extra).map { "'\($0)'" }.joined(separator: " ")
        let remote = command.isEmpty ? "" : "'\(command)'"
        let outcome = await ChildProgram.run(
            ["sh", "-c", "ssh \(arguments) -p \(server.port) 127.0.0.1 \(remote) \(redirections)"], stderrToStdout: true,
            timeout: .seconds(120))
        #expect(outcome.status == 0, "\(outcome)")
        let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
        let rekeys = log.components(separatedBy: "SSH2_MSG_NEWKEYS received").count - 2
        #expect(rekeys >= 3, "only \(rekeys) key exchanges")
        for output in transfer.outputs {
            let compared = await ChildProgram.run(["cmp", directory + "/source", directory + "/" + output], stderrToStdout: true)
            #expect(compared.status == 0, "\(output): \(compared)")
        }
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
