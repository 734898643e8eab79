import CoreMetrics
import NIOCore
import Synchronization

/// The boundary socket's open connections: at most ``maxConnections``, and a new producer
/// always gets in. Beyond the cap the new connection closes the one that has been idle
/// longest (no frame begun); when every connection is in the middle of a frame, the one
/// whose frame began first (a real producer's frame of at most 32 KiB arrives in one go, so
/// that is the one most likely stuck). So connections that send half a frame, or nothing,
/// cannot lock the real producer out, and its audit logs are not lost.
///
/// Memory: one small entry per connection; each connection buffers at most one frame
/// (4 + 32 768 bytes), so all together at most `maxConnections` frames.
final class BoundaryConnectionRegistry: Sendable {
    private struct Entry {
        var channel: any Channel
        var lastActive: NIODeadline
        /// When the frame under way began; nil between frames.
        var frameStarted: NIODeadline?
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var closed = false
        var evicted = 0
    }

    let maxConnections: Int
    private let state = Mutex(State())

    init(maxConnections: Int) {
        precondition(maxConnections > 0)
        self.maxConnections = maxConnections
    }

    /// Registers a connection; returns its id and whether another was closed to make room,
    /// or nil after ``closeAll()``.
    func admit(_ channel: any Channel) -> (id: UInt64, evicted: Bool)? {
        let result = state.withLock { s -> (UInt64, (any Channel)?)? in
            guard !s.closed else { return nil }
            var victim: (any Channel)?
            if s.entries.count >= maxConnections {
                // Linear in the number of connections (at most maxConnections), only when full.
                let idle = s.entries.filter { $0.value.frameStarted == nil }.min { $0.value.lastActive < $1.value.lastActive }
                let stuck = s.entries.min { ($0.value.frameStarted ?? .distantFuture) < ($1.value.frameStarted ?? .distantFuture) }
                if let key = (idle ?? stuck)?.key {
                    victim = s.entries.removeValue(forKey: key)?.channel
                    s.evicted += 1
                }
            }
            s.nextID += 1
            s.entries[s.nextID] = Entry(channel: channel, lastActive: .now())
            BoundaryMetrics.connections.record(s.entries.count)
            return (s.nextID, victim)
        }
        guard let (id, victim) = result else { return nil }
        victim?.close(promise: nil)
        return (id, victim != nil)
    }

    /// Notes activity, and whether a frame is under way (and since when).
    func touch(_ id: UInt64, frameStarted: NIODeadline?) {
        state.withLock { s in
            s.entries[id]?.lastActive = .now()
            s.entries[id]?.frameStarted = frameStarted
        }
    }

    func remove(_ id: UInt64) {
        state.withLock { s in
            if s.entries.removeValue(forKey: id) != nil { BoundaryMetrics.connections.record(s.entries.count) }
        }
    }

    /// Closes every connection and admits no more.
    func closeAll() {
        let channels = state.withLock { s -> [any Channel] in
            s.closed = true
            defer { s.entries.removeAll() }
            return s.entries.values.map(\.channel)
        }
        for channel in channels { channel.close(promise: nil) }
        BoundaryMetrics.connections.record(0)
    }

    var count: Int { state.withLock { $0.entries.count } }

    /// Connections closed to make room.
    var evictedCount: Int { state.withLock { $0.evicted } }
}

/// Follows boundary frame boundaries (a 4-byte header whose low 24 bits are the payload
/// length, then the payload) only to tell whether a frame has begun and not ended. The
/// decoder parses and checks the frames.
struct BoundaryFrameTracker: Sendable {
    private enum Phase: Sendable {
        case header(count: Int, length: Int)
        case payload(remaining: Int)
    }

    private var phase = Phase.header(count: 0, length: 0)

    /// True when a frame has begun and not ended.
    var isMidFrame: Bool {
        if case .header(0, _) = phase { return false }
        return true
    }

    mutating func feed<Bytes: Collection<UInt8>>(_ bytes: Bytes) where Bytes.Index == Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch phase {
            case .header(let count, let length):
                let value = (length << 8) | Int(bytes[index])
                index += 1
                if count == 3 {
                    let payload = value & 0x00FF_FFFF
                    phase = payload == 0 ? .header(count: 0, length: 0) : .payload(remaining: payload)
                } else {
                    phase = .header(count: count + 1, length: value)
                }
            case .payload(let remaining):
                let skip = min(remaining, bytes.endIndex - index)
                index += skip
                phase = skip == remaining ? .header(count: 0, length: 0) : .payload(remaining: remaining - skip)
            }
        }
    }
}

/// The first handler of each boundary connection: notes activity for the registry and
/// closes a connection that began a frame and has not finished it within
/// ``partialFrameTimeout`` of the frame's first byte (a trickled frame cannot hold a slot).
final class BoundaryConnectionWatch: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let id: UInt64
    private let registry: BoundaryConnectionRegistry
    private let partialFrameTimeout: TimeAmount
    private let onPartialFrame: @Sendable () -> Void
    private var tracker = BoundaryFrameTracker()
    private var frameStarted: NIODeadline?
    private var deadline: Scheduled<Void>?

    init(id: UInt64, registry: BoundaryConnectionRegistry, partialFrameTimeout: TimeAmount, onPartialFrame: @escaping @Sendable () -> Void) {
        self.id = id
        self.registry = registry
        self.partialFrameTimeout = partialFrameTimeout
        self.onPartialFrame = onPartialFrame
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        tracker.feed(buffer.readableBytesView)
        if tracker.isMidFrame {
            // The deadline runs from the frame's first byte: a client that trickles a byte
            // now and then gains nothing.
            if frameStarted == nil {
                frameStarted = .now()
                let channel = context.channel
                let onPartialFrame = onPartialFrame
                deadline = context.eventLoop.scheduleTask(in: partialFrameTimeout) {
                    onPartialFrame()
                    channel.close(promise: nil)
                }
            }
        } else if frameStarted != nil {
            frameStarted = nil
            deadline?.cancel()
            deadline = nil
        }
        registry.touch(id, frameStarted: frameStarted)
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        registry.remove(id)
        context.fireChannelInactive()
    }
}
