import AgentCore
import Logging
import NIOCore

/// The boundary socket's per-connection handler and its sequence check, for the fuzz
/// targets (`Fuzz/`, `make fuzz`). It exists for the fuzz targets only; the frame decoder
/// itself is public (``BoundaryFrameDecoder``).
public enum BoundaryLogsFuzzing {
    /// The handler the socket server puts after the frame decoder, over a forwarder that is
    /// never started (batches wait in memory up to its bound, then are dropped), and a
    /// closure that tells how many batches wait, and the bound.
    public static func connectionHandler(upward: any UpwardSink) -> (handler: any ChannelHandler, queued: () -> Int, capacity: Int) {
        let forwarder = BoundaryForwarder(upward: upward, spool: nil)
        let logger = Logger(label: "fuzz.boundary", factory: { _ in SwiftLogNoOpLogHandler() })
        return (BoundaryConnectionHandler(forwarder: forwarder, logger: logger), { forwarder.queuedBatches }, forwarder.configuration.memoryCapacity)
    }

    /// What one session's sequence numbers tell, as a connection checks them: numbers
    /// missing, in all, and numbers repeated.
    public static func sequenceFindings(session: String, numbers: [Int32]) -> (missing: UInt64, repeated: Int) {
        var tracker = SequenceTracker()
        var missing: UInt64 = 0
        var repeated = 0
        for finding in tracker.check(session: session, numbers: numbers) {
            switch finding {
            case .missing(_, _, let count): missing += UInt64(count)
            case .repeated: repeated += 1
            }
        }
        return (missing, repeated)
    }
}
