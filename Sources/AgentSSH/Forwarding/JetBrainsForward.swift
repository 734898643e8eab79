import AgentCore
import FoundationEssentials
import NIOCore
import NIOPosix

/// JetBrains Gateway reaches its IDE backend through `ssh -L`: such a `direct-tcpip`
/// channel, whose destination port belongs to a process whose command line names JetBrains,
/// counts as a JetBrains session (`session_count_jetbrains`) while it is open and is reported
/// upward (`ReportConnection` type JETBRAINS: CONNECT with the channel's origin address,
/// DISCONNECT with status 0 and `normal close` when it closes), as the reference does.
///
/// Cost: once per `direct-tcpip` channel opened, on NIO's blocking thread pool after the
/// connect succeeded (the forward is never delayed): both socket tables, then the
/// descriptors of `/proc/*/fd` until the port's socket is found, then one command line;
/// bounded by ``ProcSocketOwners`` (16 MiB a table, 16 384 processes, 262 144 descriptors,
/// 1 MiB of command line).
struct JetBrainsForward: Sendable {
    /// The reference's markers, matched case-insensitively anywhere in the command line.
    static let markers = ["idea.vendor.name=jetbrains", "com.jetbrains.toolbox", "remote-dev-server"].map { Array($0.utf8) }

    let counts: SessionCounts
    let upward: any UpwardSink
    /// The command line of the process holding a local TCP port (nil when none is found).
    let commandLine: @Sendable (UInt16) -> [UInt8]?

    init(
        counts: SessionCounts, upward: any UpwardSink,
        commandLine: @escaping @Sendable (UInt16) -> [UInt8]? = { ProcSocketOwners().commandLine(ofLocalPort: $0) }
    ) {
        self.counts = counts
        self.upward = upward
        self.commandLine = commandLine
    }

    static func isJetBrains(commandLine: [UInt8]) -> Bool {
        let lowered = commandLine.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
        return markers.contains { lowered.firstRange(of: $0) != nil }
    }

    /// Looks at `channel`'s destination `port` (off the loop) and, when its owner is a
    /// JetBrains process and the channel is still open, counts and reports it until it closes.
    func watch(_ channel: any Channel, port: UInt16, origin: String) {
        let lookup = commandLine
        NIOThreadPool.singleton.runIfActive(eventLoop: channel.eventLoop) { () -> Bool in
            guard let line = lookup(port) else { return false }
            return Self.isJetBrains(commandLine: line)
        }.whenSuccess { jetbrains in
            guard jetbrains, channel.isActive else { return }
            self.track(channel, origin: origin)
        }
    }

    /// On the channel's loop, while it is open.
    private func track(_ channel: any Channel, origin: String) {
        counts.started(.jetbrains)
        let connect = ConnectionReport(id: ConnectionReport.newID(), action: .connect, kind: .jetbrains, ip: origin)
        upward.send(connect)
        channel.closeFuture.whenComplete { [counts, upward] _ in
            counts.ended(.jetbrains)
            var report = connect
            report.action = .disconnect
            report.timestamp = Date()
            report.statusCode = 0
            report.reason = "normal close"
            upward.send(report)
        }
    }
}
