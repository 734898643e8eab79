@testable import AgentSSH
import NIOCore
import NIOEmbedded
import NIOSSH
import Synchronization
import Testing

/// ``SSHRekeyMachine``, ``SSHRekeyGate`` and ``RekeyHold`` without sockets: a KEXINIT is
/// deferred past the end of its read, channels hold from its replay until the agent's
/// NEWKEYS, and what they held goes on in order.
struct SSHRekeyMachineTests {
    static let kexInit = ByteBuffer(bytes: [SSHRekeyMachine.kexInitType, 1, 2, 3])
    static let data = ByteBuffer(bytes: [94, 0, 0, 0, 1])

    @Test func aKexInitIsDeferredPastItsReadThenReplayed() throws {
        var machine = SSHRekeyMachine()
        #expect(try machine.inbound(Self.data) == Self.data)
        #expect(machine.readComplete() == .none)
        #expect(try machine.inbound(Self.kexInit) == SSHRekeyMachine.ignore)
        #expect(machine.phase == .deferring && !machine.isHolding)
        // What follows it in the same read waits with it, in order.
        let next = ByteBuffer(bytes: [30, 9])
        #expect(try machine.inbound(next) == SSHRekeyMachine.ignore)
        #expect(machine.readComplete() == .replay(count: 2))
        #expect(machine.isHolding)
        #expect(try machine.replayed() == Self.kexInit)
        #expect(machine.phase == .replaying)
        #expect(try machine.replayed() == next)
        #expect(machine.phase == .holding)
        #expect(throws: SSHRekeyError.unexpectedMarker) { try machine.replayed() }
        // Packets during the exchange are parsed as they come; a read's end changes nothing
        // until the agent's NEWKEYS has gone.
        #expect(try machine.inbound(ByteBuffer(bytes: [31])) == ByteBuffer(bytes: [31]))
        #expect(machine.readComplete() == .none)
        machine.outbound(type: 31)
        #expect(machine.readComplete() == .none)
        machine.outbound(type: SSHRekeyMachine.newKeysType)
        #expect(machine.isHolding)
        #expect(machine.readComplete() == .release)
        #expect(machine.phase == .open && !machine.isHolding)
        // The next rekey goes the same way.
        #expect(try machine.inbound(Self.kexInit) == SSHRekeyMachine.ignore)
        #expect(machine.readComplete() == .replay(count: 1))
    }

    @Test func aNewKeysOutsideARekeyChangesNothing() {
        var machine = SSHRekeyMachine()
        machine.outbound(type: SSHRekeyMachine.newKeysType)
        #expect(machine.readComplete() == .none)
        #expect(machine.phase == .open)
    }

    @Test func aClientThatKeepsSendingAfterItsKexInitIsRefused() throws {
        var machine = SSHRekeyMachine()
        _ = try machine.inbound(Self.kexInit)
        for _ in 1..<SSHRekeyMachine.maxDeferredPackets { _ = try machine.inbound(Self.data) }
        #expect(throws: SSHRekeyError.tooMuchDeferred) { try machine.inbound(Self.data) }
        var big = SSHRekeyMachine()
        _ = try big.inbound(Self.kexInit)
        let huge = ByteBuffer(repeating: 94, count: SSHRekeyMachine.maxDeferredBytes)
        #expect(throws: SSHRekeyError.tooMuchDeferred) { try big.inbound(huge) }
    }

    @Test func theGateTakesOnlyItsOwnMarkers() throws {
        let gate = SSHRekeyGate()
        _ = try gate.inbound(Self.kexInit)
        var markers = try #require(gate.readComplete(allocator: ByteBufferAllocator()))
        #expect(markers.readableBytes == SSHRekeyGate.marker.count)
        #expect(gate.isReplaying)
        var forged = ByteBuffer(bytes: SSHRekeyGate.marker.dropLast() + [0])
        #expect(throws: SSHRekeyError.unexpectedMarker) { try gate.replay(&forged) }
        #expect(try gate.replay(&markers) == Self.kexInit)
        #expect(markers.readableBytes == 0)
        #expect(!gate.isReplaying && gate.isHolding)
    }

    /// A channel's writes, flushes, reads, requests and close wait for the exchange and then
    /// go in order; its writers are woken; what waited for the gate runs first.
    @Test func aHoldPassesItsOperationsOnInOrderWhenTheExchangeEnds() throws {
        let gate = SSHRekeyGate()
        let channel = EmbeddedChannel()
        let recorder = OutboundRecorder()
        // Outbound, the hold comes before the recorder, which is next to the channel.
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.pipeline.syncOperations.addHandler(RekeyHold(gate: gate))
        let wakes = WritabilityCounter()
        try channel.pipeline.syncOperations.addHandler(wakes)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()

        channel.write(ByteBuffer(string: "before"), promise: nil)
        channel.flush()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "before"))
        recorder.operations.removeAll()

        _ = try gate.inbound(Self.kexInit)
        var markers = try #require(gate.readComplete(allocator: channel.allocator))
        _ = try gate.replay(&markers)
        #expect(gate.isHolding && RekeyHold.isHolding(channel))
        var ran: [String] = []
        gate.whenOpen { ran.append("waiter") }
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.write(ByteBuffer(string: "held"), promise: written)
        channel.flush()
        channel.read()
        channel.read()
        channel.triggerUserOutboundEvent(ChannelSuccessEvent(), promise: nil)
        let closed = channel.eventLoop.makePromise(of: Void.self)
        channel.close(mode: .output, promise: closed)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(recorder.operations.isEmpty)
        #expect(gate.readComplete(allocator: channel.allocator) == nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)

        gate.outbound(type: SSHRekeyMachine.newKeysType)
        let woken = wakes.count
        #expect(gate.readComplete(allocator: channel.allocator) == nil)
        #expect(ran == ["waiter"])
        #expect(!gate.isHolding)
        #expect(recorder.operations == ["write", "flush", "read", "event", "close"])
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "held"))
        #expect(wakes.count == woken + 1)
        _ = try? channel.finish()
    }

    /// A connection that closes mid exchange runs what waited (a forwarded connection's
    /// open then fails and closes it; before, it stayed open for good) and lets go.
    @Test func aClosedConnectionRunsWhatWaitsAndLetsGo() throws {
        let gate = SSHRekeyGate()
        let loop = EmbeddedEventLoop()
        _ = try gate.inbound(Self.kexInit)
        var markers = try #require(gate.readComplete(allocator: ByteBufferAllocator()))
        _ = try gate.replay(&markers)
        var ran = false
        gate.whenOpen { ran = true }
        let reply = loop.makePromise(of: Int.self)
        let passed = gate.afterOpen(reply.futureResult)
        let answer = Mutex<Int?>(nil)
        passed.whenSuccess { value in answer.withLock { $0 = value } }
        reply.succeed(7)
        #expect(!ran && answer.withLock { $0 } == nil && gate.isHolding)
        gate.connectionClosed()
        #expect(ran && answer.withLock { $0 } == 7 && !gate.isHolding)
        #expect(gate.readComplete(allocator: ByteBufferAllocator()) == nil)
    }

    /// A channel that goes while holding fails what it held.
    @Test func aHoldRemovedFailsWhatItHeld() throws {
        let gate = SSHRekeyGate()
        let channel = EmbeddedChannel()
        let hold = RekeyHold(gate: gate)
        try channel.pipeline.syncOperations.addHandler(hold)
        _ = try gate.inbound(Self.kexInit)
        var markers = try #require(gate.readComplete(allocator: channel.allocator))
        _ = try gate.replay(&markers)
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.write(ByteBuffer(string: "held"), promise: written)
        try channel.pipeline.syncOperations.removeHandler(hold).wait()
        #expect(throws: ChannelError.ioOnClosedChannel) { try written.futureResult.wait() }
    }

    /// Records the outbound operations that reach it (it sits next to the channel).
    final class OutboundRecorder: ChannelOutboundHandler {
        typealias OutboundIn = Any
        var operations: [String] = []
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            operations.append("write")
            context.write(data, promise: promise)
        }
        func flush(context: ChannelHandlerContext) {
            operations.append("flush")
            context.flush()
        }
        func read(context: ChannelHandlerContext) {
            operations.append("read")
            context.read()
        }
        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            operations.append("close")
            promise?.succeed()
        }
        func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
            operations.append("event")
            promise?.succeed()
        }
    }

    final class WritabilityCounter: ChannelInboundHandler {
        typealias InboundIn = Any
        var count = 0
        func channelWritabilityChanged(context: ChannelHandlerContext) {
            count += 1
            context.fireChannelWritabilityChanged()
        }
    }
}
