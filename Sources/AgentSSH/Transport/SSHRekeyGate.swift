import NIOCore
import NIOSSH

/// One connection's hold on its channels while the client rekeys (``SSHRekeyMachine``
/// says when): the cipher reports what it decrypts and encrypts, ``SSHParsingScopeHandler``
/// feeds the deferred packets back after a read, and each channel's ``RekeyHold`` asks
/// ``isHolding``. Confined to the connection's event loop.
final class SSHRekeyGate {
    private var machine = SSHRekeyMachine()
    /// One per open channel (the connection's list of its channels): at most its channels (64 the client opens, and
    /// the forwards the agent opens, each bounded in ``SSHServer``'s documentation).
    private var holds: [ObjectIdentifier: RekeyHold] = [:]
    /// What waits for the exchange to end: channel opens, open replies and global request
    /// replies, at most one per channel or request the limits above allow.
    private var waiters: [() -> Void] = []

    /// A packet fed to the parser in place of a deferred one: a 12-byte body (one cipher
    /// block with the length) and a 16-byte tag, the smallest packet the parser takes.
    static let marker: [UInt8] = [0, 0, 0, 12] + Array("rekey-replay".utf8) + [UInt8](repeating: 0xA5, count: 16)

    var isHolding: Bool { machine.isHolding }

    // MARK: The cipher

    /// Whether the next packet to decrypt is a marker.
    var isReplaying: Bool { machine.phase == .replaying }

    func inbound(_ payload: ByteBuffer) throws -> ByteBuffer { try machine.inbound(payload) }

    /// The deferred packet that `source` (a whole marker packet) stands for.
    func replay(_ source: inout ByteBuffer) throws -> ByteBuffer {
        guard source.readableBytesView.elementsEqual(Self.marker) else { throw SSHRekeyError.unexpectedMarker }
        source.moveReaderIndex(forwardBy: source.readableBytes)
        return try machine.replayed()
    }

    func outbound(type: UInt8) { machine.outbound(type: type) }

    // MARK: The connection

    /// A read has ended; returns the marker packets to feed as one more read, if any.
    func readComplete(allocator: ByteBufferAllocator) -> ByteBuffer? {
        switch machine.readComplete() {
        case .none: return nil
        case .replay(let count):
            var markers = allocator.buffer(capacity: count * Self.marker.count)
            for _ in 0..<count { markers.writeBytes(Self.marker) }
            return markers
        case .release:
            release()
            return nil
        }
    }

    /// The connection has closed: what waits runs now (an open fails, a reply goes nowhere,
    /// and what they hold, such as a forwarded connection, is closed) and channels let go.
    func connectionClosed() {
        machine.connectionClosed()
        release()
    }

    private func release() {
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting { waiter() }
        for hold in holds.values { hold.release() }
    }

    /// Tells every open channel that it may be writable again (its writers look).
    func wakeChannels() {
        for hold in holds.values { hold.wake() }
    }

    // MARK: Channels and replies

    func register(_ hold: RekeyHold, for channel: any Channel) {
        holds[ObjectIdentifier(channel)] = hold
    }

    func unregister(_ channel: any Channel) {
        holds[ObjectIdentifier(channel)] = nil
    }

    /// Runs `body` now, or when the exchange has ended.
    func whenOpen(_ body: @escaping () -> Void) {
        if machine.isHolding { waiters.append(body) } else { body() }
    }

    /// `future`'s result, passed on once no exchange is under way.
    func afterOpen<Value>(_ future: EventLoopFuture<Value>) -> EventLoopFuture<Value> {
        let passed = future.eventLoop.makePromise(of: Value.self)
        future.assumeIsolated().whenComplete { result in
            self.whenOpen { passed.assumeIsolated().completeWith(result) }
        }
        return passed.futureResult
    }

    /// The gate of `channel` (an SSH connection), if it has one.
    static func of(_ channel: (any Channel)?) -> SSHRekeyGate? {
        (try? channel?.pipeline.syncOperations.handler(type: SSHParsingScopeHandler.self))?.gate
    }
}
