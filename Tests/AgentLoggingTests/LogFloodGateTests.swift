import AgentCore
@testable import AgentLogging
import Logging
import Synchronization
import Testing

@Suite struct LogFloodGateTests {
    /// A flood from one module leaves room for another's warning and for errors; the
    /// flood's next line after the window says how many were left out.
    @Test func aFloodCannotCrowdOutOthers() {
        var gate = LogFloodGate()
        let start = ContinuousClock.now
        var sent = 0
        for index in 0..<10_000 where gate.admit(source: "BoundaryLogs", level: .warning, message: "drop \(index)", now: start) != nil {
            sent += 1
        }
        #expect(sent == LogFloodGate.perWindow)
        #expect(gate.admit(source: "GitWatch", level: .warning, message: "cannot read repository", now: start) == "cannot read repository")
        #expect(gate.admit(source: "BoundaryLogs", level: .error, message: "spool failed", now: start) == "spool failed")
        let later = gate.admit(source: "BoundaryLogs", level: .warning, message: "drop again", now: start + LogFloodGate.window)
        #expect(later == "drop again (\(10_000 - LogFloodGate.perWindow) similar lines from BoundaryLogs left out in the last 60.0 seconds)")
    }

    /// Through the forwarder: what reaches the upward seam.
    @Test func theForwarderShipsABoundedShare() {
        let sink = RecordingSink()
        let forwarder = LogForwarder()
        forwarder.connect(to: sink)
        for _ in 0..<500 { forwarder.forward(level: .warning, source: "Noisy", message: "again") }
        forwarder.forward(level: .warning, source: "Quiet", message: "important")
        forwarder.forward(level: .info, source: "Quiet", message: "not shipped")
        let lines = sink.lines
        #expect(lines.count == LogFloodGate.perWindow + 1)
        #expect(lines.last?.message == "important")
    }
}

/// An upward seam that records the log lines it is given.
final class RecordingSink: UpwardSink {
    private let recorded = Mutex<[AgentLogLine]>([])
    var lines: [AgentLogLine] { recorded.withLock { $0 } }
    func send(_ status: AppStatusReport) -> UpwardReceipt { UpwardReceipt() }
    func send(_ batch: BoundaryLogBatch) -> UpwardReceipt { UpwardReceipt() }
    func send(_ report: ConnectionReport) {}
    func send(_ line: AgentLogLine) { recorded.withLock { $0.append(line) } }
    var isConnected: Bool { true }
    var hasControlPlane: Bool { true }
}
