import AgentCore
import Metrics
import NIOCore
import Synchronization

/// The speed test of tailnet port 3 (`coder speedtest`): tailscale's protocol version 2 on
/// each connection the tailnet hands over (see ``SpeedtestHandler``).
///
/// Bounds: at most ``maxConnections`` tests at once (a further connection is closed at once;
/// each test can fill a core and the link), the request within ``requestTimeout``.
public final class SpeedtestServer: Sendable {
    /// Tests running at once, at most.
    public static let maxConnections = 8
    /// How long a client may take to send its request.
    public static let defaultRequestTimeout: TimeAmount = .seconds(30)

    let requestTimeout: TimeAmount
    /// How long a download's last block may drain without a slice going out (``SpeedtestHandler``).
    let drainGrace: TimeAmount
    private let open = Mutex(0)
    private let metrics = SpeedtestMetrics()
    /// One block of random bytes, written again and again (ByteBuffer shares its storage);
    /// made by the first test, so an agent that never runs one holds none of its 2 MiB.
    private let sharedBlock = Mutex<ByteBuffer?>(nil)

    public init(requestTimeout: TimeAmount = SpeedtestServer.defaultRequestTimeout, drainGrace: TimeAmount = .seconds(5)) {
        self.requestTimeout = requestTimeout
        self.drainGrace = drainGrace
    }

    /// The block: random bytes from a generator seeded once from the system's.
    private var block: ByteBuffer {
        sharedBlock.withLock { stored in
            if let stored { return stored }
            var state = UInt64.random(in: 1...UInt64.max)
            var block = ByteBufferAllocator().buffer(capacity: SpeedtestHandler.blockSize)
            block.writeWithUnsafeMutableBytes(minimumWritableBytes: SpeedtestHandler.blockSize) { raw in
                let words = raw.bindMemory(to: UInt64.self)
                for index in 0..<(SpeedtestHandler.blockSize / 8) {
                    // xorshift64*: fast, and random enough for bytes nobody inspects.
                    state ^= state >> 12
                    state ^= state << 25
                    state ^= state >> 27
                    words[index] = state &* 0x2545_F491_4F6C_DD1D
                }
                return SpeedtestHandler.blockSize
            }
            stored = block
            return block
        }
    }

    /// Serves `channel` (on its loop, before it is active) as one speed test connection.
    public func serve(_ channel: any Channel) -> EventLoopFuture<Void> {
        let admitted = open.withLock { count -> Bool in
            guard count < Self.maxConnections else { return false }
            count += 1
            return true
        }
        guard admitted else {
            metrics.refused.increment()
            return channel.close()
        }
        channel.closeFuture.whenComplete { [self] _ in open.withLock { $0 -= 1 } }
        let handler = SpeedtestHandler(block: block, requestTimeout: requestTimeout, drainGrace: drainGrace, metrics: metrics)
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(handler)
        }
    }
}
