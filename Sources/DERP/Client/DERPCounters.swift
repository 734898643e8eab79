import CoreMetrics
import Synchronization

/// A client's statistics, shared by its connections (any thread), mirrored to metrics.
final class DERPCounters: Sendable {
    private let value = Mutex(DERPClientStatistics())

    var snapshot: DERPClientStatistics { value.withLock { $0 } }

    func sent(bytes: Int) {
        value.withLock {
            $0.framesSent += 1
            $0.bytesSent += bytes
        }
        DERPMetrics.framesSent.increment()
        DERPMetrics.bytesSent.increment(by: bytes)
    }

    func received(bytes: Int) {
        value.withLock {
            $0.framesReceived += 1
            $0.bytesReceived += bytes
        }
        DERPMetrics.framesReceived.increment()
        DERPMetrics.bytesReceived.increment(by: bytes)
    }

    func dropped(_ reason: String) {
        value.withLock { $0.drops[reason, default: 0] += 1 }
        DERPMetrics.dropped(reason)
    }

    func connected() {
        let again = value.withLock { s -> Bool in
            s.connects += 1
            if s.connects > 1 { s.reconnects += 1 }
            return s.connects > 1
        }
        DERPMetrics.connects.increment()
        if again { DERPMetrics.reconnects.increment() }
    }

    /// Reserves room for one outbound frame of `bytes`; false (and a `queue_full` drop)
    /// when either bound would be passed.
    func reserve(bytes: Int, maxPackets: Int, maxBytes: Int) -> Bool {
        let ok = value.withLock { s -> Bool in
            guard s.queuedPackets < maxPackets, s.queuedBytes + bytes <= maxBytes else { return false }
            s.queuedPackets += 1
            s.queuedBytes += bytes
            s.peakQueuedBytes = max(s.peakQueuedBytes, s.queuedBytes)
            return true
        }
        if !ok { dropped("queue_full") }
        return ok
    }

    /// A reserved frame left the queue (written, or failed with its connection).
    func release(bytes: Int, written: Bool) {
        value.withLock {
            $0.queuedPackets -= 1
            $0.queuedBytes -= bytes
            if written {
                $0.framesSent += 1
                $0.bytesSent += bytes
            } else {
                $0.drops["closed", default: 0] += 1
            }
        }
        if written {
            DERPMetrics.framesSent.increment()
            DERPMetrics.bytesSent.increment(by: bytes)
        } else {
            DERPMetrics.dropped("closed")
        }
    }
}
