import AgentProto
import CoreMetrics
import Logging
import NIOCore
import SwiftProtobuf

/// One boundary connection: decodes each frame; logs go to the
/// forwarder, status frames straight to the metrics. A body that does not decode is skipped
/// (the frame was fully read, so the stream stays in sync); a bad header closes the
/// connection. Beyond the reference: sequence numbers are checked per session, so a gap
/// (entries boundary lost before sending) is counted and logged.
final class BoundaryConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = BoundaryFrame

    private let forwarder: BoundaryForwarder
    private let logger: Logger
    private var sequences = SequenceTracker()
    /// Warnings this connection may log a minute: a client that floods bad or gapped frames
    /// costs a few lines (the metrics count everything), not one or more per frame.
    static let maxWarningsPerMinute = 10
    private var warnings = (minuteStarted: NIODeadline.now(), count: 0, leftOut: 0)

    init(forwarder: BoundaryForwarder, logger: Logger) {
        self.forwarder = forwarder
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .v1(let payload):
            guard let request = decode(Coder_Agent_V2_ReportBoundaryLogsRequest.self, payload) else { return }
            accept(request)
        case .v2(let payload):
            guard let message = decode(Coder_Boundarylogproxy_Codec_V1_BoundaryMessage.self, payload) else { return }
            switch message.msg {
            case .logs(let request)?: accept(request)
            case .status(let status)?: Self.record(status)
            case nil:
                BoundaryMetrics.framesSkipped("empty").increment()
                warn("boundary message with neither logs nor status; ignored", [:])
            }
        }
    }

    private func decode<M: SwiftProtobuf.Message>(_ type: M.Type, _ payload: ByteBuffer) -> M? {
        do {
            return try M(serializedBytes: Array(payload.readableBytesView))
        } catch {
            BoundaryMetrics.framesSkipped("undecodable").increment()
            warn("undecodable boundary frame skipped", ["error": "\(error)", "bytes": "\(payload.readableBytes)"])
            return nil
        }
    }

    private func accept(_ request: Coder_Agent_V2_ReportBoundaryLogsRequest) {
        // One line per frame for all its gaps: the first missing number, the last, how many.
        var missing: (from: Int32, through: Int32, count: UInt64, gaps: Int)?
        for gap in sequences.check(session: request.sessionID, numbers: request.logs.map(\.sequenceNumber)) {
            switch gap {
            case .missing(let from, let through, let count):
                BoundaryMetrics.sequenceGaps.increment(by: Int64(count))
                if let seen = missing {
                    missing = (seen.from, through, seen.count + UInt64(count), seen.gaps + 1)
                } else {
                    missing = (from, through, UInt64(count), 1)
                }
            case .repeated:
                BoundaryMetrics.sequenceDuplicates.increment()
            }
        }
        if let missing {
            warn(
                "boundary skipped sequence numbers",
                [
                    "session_id": "\(request.sessionID.prefix(64))", "missing": "\(missing.from)...\(missing.through)",
                    "count": "\(missing.count)", "gaps": "\(missing.gaps)",
                ])
        }
        forwarder.enqueue(request)
    }

    /// Logs a warning within the connection's budget (``maxWarningsPerMinute``); those left
    /// out are counted in the first line of the next minute.
    private func warn(_ message: Logger.Message, _ metadata: Logger.Metadata) {
        let now = NIODeadline.now()
        if now - warnings.minuteStarted >= .minutes(1) {
            if warnings.leftOut > 0 {
                logger.warning("boundary connection: warnings left out", metadata: ["count": "\(warnings.leftOut)"])
            }
            warnings = (now, 0, 0)
        }
        guard warnings.count < Self.maxWarningsPerMinute else {
            warnings.leftOut += 1
            return
        }
        warnings.count += 1
        logger.warning(message, metadata: metadata)
    }

    /// Boundary's own drop counts (deltas; zero or negative values are ignored).
    static func record(_ status: Coder_Boundarylogproxy_Codec_V1_BoundaryStatus) {
        if status.droppedChannelFull > 0 { BoundaryMetrics.logsDropped("boundary_channel_full").increment(by: status.droppedChannelFull) }
        if status.droppedBatchFull > 0 { BoundaryMetrics.logsDropped("boundary_batch_full").increment(by: status.droppedBatchFull) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let framing = error as? BoundaryFramingError {
            BoundaryMetrics.framingErrors.increment()
            logger.warning("closing a boundary connection", metadata: ["error": "\(framing)"])
        }
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Silent for the idle timeout: boundary dials again on its next flush.
        if event is IdleStateHandler.IdleStateEvent {
            BoundaryMetrics.disconnected("idle").increment()
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// The last sequence number seen per session on one connection (at most 16 sessions: a
/// boundary process has one).
///
/// Sequence numbers are int32 and wrap (Go's `int32` overflow: 2147483647 is followed by
/// -2147483648), so they are compared as serial numbers (RFC 1982): the forward distance
/// from the last number, modulo 2^32. A distance of 1 is the next number, 2...2^31-1 a gap
/// of distance - 1 numbers (across a wrap too), 0 or 2^31 and beyond a repeat (a number
/// at or before the last one). Arithmetic wraps; nothing traps.
struct SequenceTracker {
    enum Finding: Equatable {
        /// Numbers `from` through `through` (wrapping) never arrived: `count` of them.
        case missing(from: Int32, through: Int32, count: UInt32)
        case repeated(Int32)
    }

    static let maxSessions = 16
    private var last: [String: Int32] = [:]

    mutating func check(session: String, numbers: [Int32]) -> [Finding] {
        // Producers older than API 2.9 send no session and no numbers.
        guard !session.isEmpty else { return [] }
        var findings: [Finding] = []
        var previous = last[session]
        for number in numbers {
            guard let before = previous else {
                previous = number
                continue
            }
            let distance = UInt32(bitPattern: number &- before)
            if distance == 0 || distance > UInt32(Int32.max) {
                findings.append(.repeated(number))
                continue
            }
            if distance > 1 { findings.append(.missing(from: before &+ 1, through: number &- 1, count: distance - 1)) }
            previous = number
        }
        if last[session] == nil && last.count >= Self.maxSessions { last.removeAll() }
        last[session] = previous
        return findings
    }
}
