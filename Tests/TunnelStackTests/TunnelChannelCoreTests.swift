import NIOCore
import NIOPosix
import Testing
import TunnelStack

/// The channel core without lwIP or a pipeline: segments in, events and bytes out.
@Suite struct TunnelChannelCoreTests {
    private func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    private func events(_ core: inout TunnelChannelCore) -> [String] {
        var out: [String] = []
        // Bounded: a core never has more than a few events queued.
        for _ in 0..<16 {
            guard let event = core.nextInbound() else { break }
            switch event {
            case .read(let buffer): out.append("read:\(String(buffer: buffer))")
            case .readComplete: out.append("complete")
            case .inputClosed: out.append("inputClosed")
            case .close: out.append("close")
            }
        }
        return out
    }

    @Test func bytesWaitForActivationThenFlowWithAutoRead() {
        var core = TunnelChannelCore()
        var data = bytes("GET /")
        let tookdata = core.received(&data)
        #expect(tookdata)
        #expect(events(&core).isEmpty)
        core.activate()
        #expect(events(&core) == ["read:GET /", "complete"])
        var more = bytes(" HTTP/1.1")
        let tookmore = core.received(&more)
        #expect(tookmore)
        #expect(events(&core) == ["read: HTTP/1.1", "complete"])
    }

    @Test func withoutAutoReadBytesAreHeldUntilRead() {
        var core = TunnelChannelCore()
        core.autoRead = false
        core.activate()
        var first = bytes("abc")
        var second = bytes("def")
        let tookfirst = core.received(&first)
        #expect(tookfirst)
        let tooksecond = core.received(&second)
        #expect(tooksecond)
        // Back pressure: nothing reaches the pipeline (or is acknowledged) without a read.
        #expect(events(&core).isEmpty)
        #expect(core.heldBytes == 6)
        core.read()
        #expect(events(&core) == ["read:abcdef", "complete"])
        #expect(core.heldBytes == 0)
        var third = bytes("g")
        let tookthird = core.received(&third)
        #expect(tookthird)
        #expect(events(&core).isEmpty)
    }

    @Test func peerFINAfterItsBytesIsInputClosedWithHalfClosure() {
        var core = TunnelChannelCore()
        core.allowRemoteHalfClosure = true
        core.activate()
        var data = bytes("last")
        let tookdata = core.received(&data)
        #expect(tookdata)
        core.receivedFIN()
        #expect(events(&core) == ["read:last", "complete", "inputClosed"])
        // Once only, and nothing may follow the FIN.
        var late = bytes("x")
        let tooklate = core.received(&late)
        #expect(!tooklate)
        #expect(events(&core).isEmpty)
    }

    @Test func peerFINWithoutHalfClosureClosesTheChannel() {
        var core = TunnelChannelCore()
        core.activate()
        core.receivedFIN()
        #expect(events(&core) == ["close"])
    }

    @Test func writesDrainAsLwIPTakesThemAndWritabilityFollows() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var core = TunnelChannelCore()
        core.activate()
        let big = ByteBuffer(repeating: 7, count: TunnelChannelCore.highWaterMark)
        let first = loop.makePromise(of: Void.self)
        #expect(core.write(big, promise: first) == (false, nil))
        let second = loop.makePromise(of: Void.self)
        let (refused, changed) = core.write(bytes("tail"), promise: second)
        #expect(!refused)
        #expect(changed == false)
        #expect(!core.isWritable)
        core.flush()
        // lwIP's send buffer takes 16 KiB only: nothing completes, still unwritable.
        var sent = 0
        var drained = core.drain { buffer in
            let taken = min(buffer.readableBytes, 16384)
            sent += taken
            return taken
        }
        #expect(drained.completed.isEmpty)
        #expect(drained.writabilityChanged == nil)
        // The peer acknowledged: room for everything.
        drained = core.drain { buffer in
            sent += buffer.readableBytes
            return buffer.readableBytes
        }
        #expect(sent == TunnelChannelCore.highWaterMark + 4)
        #expect(drained.completed.count == 2)
        #expect(drained.writabilityChanged == true)
        #expect(core.isWritable)
        for promise in drained.completed { promise.succeed() }
        try await first.futureResult.get()
        try await second.futureResult.get()
    }

    @Test func unflushedWritesWaitForFlush() {
        var core = TunnelChannelCore()
        core.activate()
        _ = core.write(bytes("abc"), promise: nil)
        var sent = 0
        _ = core.drain { buffer in
            sent += buffer.readableBytes
            return buffer.readableBytes
        }
        #expect(sent == 0)
        core.flush()
        _ = core.drain { buffer in
            sent += buffer.readableBytes
            return buffer.readableBytes
        }
        #expect(sent == 3)
    }

    @Test func outputCloseSendsFINAfterFlushedWritesAndFailsLaterOnes() {
        var core = TunnelChannelCore()
        core.activate()
        _ = core.write(bytes("answer"), promise: nil)
        core.flush()
        _ = core.write(bytes("unflushed"), promise: nil)
        let dropped = core.closeOutput(promise: nil)
        #expect(dropped?.count == 0)
        // lwIP is full: no FIN yet.
        var drained = core.drain { _ in 0 }
        #expect(!drained.shutdownOutput)
        var sent: [String] = []
        drained = core.drain { buffer in
            sent.append(String(buffer: buffer))
            return buffer.readableBytes
        }
        #expect(sent == ["answer"])
        #expect(drained.shutdownOutput)
        #expect(core.outputClosed)
        // A write after the FIN is refused; a second output close too.
        #expect(core.write(bytes("late"), promise: nil).refused)
        #expect(core.closeOutput(promise: nil) == nil)
        // Reading goes on after our FIN (half-close).
        var data = bytes("more")
        let tookdata = core.received(&data)
        #expect(tookdata)
        #expect(events(&core) == ["read:more", "complete"])
    }

    @Test func closeFailsWaitingWritesAndReportsUnacknowledgedBytes() {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var core = TunnelChannelCore()
        core.autoRead = false
        core.activate()
        var data = bytes("unread")
        let tookdata = core.received(&data)
        #expect(tookdata)
        let write = loop.makePromise(of: Void.self)
        _ = core.write(bytes("queued"), promise: write)
        core.flush()
        let closing = core.close()
        #expect(closing?.failedWrites.count == 1)
        #expect(closing?.unacknowledged == 6)
        #expect(closing?.wasActive == true)
        closing?.failedWrites.forEach { $0.fail(ChannelError.ioOnClosedChannel) }
        #expect(core.state == .closed)
        #expect(core.close() == nil)
        var late = bytes("x")
        let tooklate = core.received(&late)
        #expect(!tooklate)
        #expect(core.write(bytes("y"), promise: nil).refused)
    }

    @Test func abortBeforeActivationIsNotActive() {
        var core = TunnelChannelCore()
        let closing = core.close()
        #expect(closing?.wasActive == false)
    }
}
