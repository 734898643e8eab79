import AgentCore
import Metrics
import NIOCore

/// One speed test connection: reads the request (at most ``SpeedtestRequest/maxBytes``, within
/// ``SpeedtestServer/requestTimeout``), answers it, then writes 2 MiB blocks until the test's
/// time has passed and closes once the last block has gone out (the client downloads), or
/// reads and drops what the client sends until its EOF or the time and 5 s more (the client
/// uploads).
///
/// The last block may drain slowly (a slow link, a loaded host): the agent waits for it as
/// long as it moves, and closes a client that stopped reading once no slice of it has gone
/// out for the drain grace (so a link slower than a slice per grace, about 13 KiB/s, counts
/// as stopped). The reference's blocking write waits for ever.
///
/// Memory: the request's bytes, one shared block, and NIO's queue of at most one block's
/// write beyond the channel's high-water mark (the next block waits for writability); a
/// block's slices share its storage.
final class SpeedtestHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The size of each block the agent writes (the reference's).
    static let blockSize = 2 << 20
    /// A block is written in slices of this size, so that its drain can be seen to move.
    static let sliceSize = 64 << 10
    /// After an upload's time, how long the client may still send before the agent closes.
    static let uploadGrace: TimeAmount = .seconds(5)
    /// After a download's time, how long the last block's drain may stand still before the
    /// agent closes anyway (a client that stopped reading cannot hold the connection).
    static let defaultDrainGrace: TimeAmount = .seconds(5)

    private enum State {
        case request
        case download(deadline: NIODeadline)
        case upload
        case finished
    }

    private let block: ByteBuffer
    private let requestTimeout: TimeAmount
    private let drainGrace: TimeAmount
    private var state = State.request
    private var received: ByteBuffer?
    private var timer: Scheduled<Void>?
    private var lastWrite: EventLoopFuture<Void>?
    /// When a slice last went out (or the download's time ended, if later): the drain grace
    /// counts from here.
    private var lastProgress = NIODeadline.uptimeNanoseconds(0)
    /// Whether ``pump(context:first:)`` is running: its loop goes on while the channel is
    /// writable, so a writability change NIO reports from inside one of its writes is left to it.
    private var pumping = false
    private let metrics: SpeedtestMetrics

    init(block: ByteBuffer, requestTimeout: TimeAmount, drainGrace: TimeAmount = SpeedtestHandler.defaultDrainGrace, metrics: SpeedtestMetrics) {
        self.drainGrace = drainGrace
        self.block = block
        self.requestTimeout = requestTimeout
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        _ = context.channel.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: requestTimeout) { bound.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        state = .finished
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        switch state {
        case .request:
            if received == nil {
                received = buffer
            } else {
                received!.writeBuffer(&buffer)
            }
            let bytes = received!.readableBytesView
            let end = SpeedtestRequest.end(of: bytes.prefix(SpeedtestRequest.maxBytes + 1))
            if let end, end <= SpeedtestRequest.maxBytes {
                answer(SpeedtestRequest.answer(bytes.prefix(end)), context: context)
            } else if bytes.count > SpeedtestRequest.maxBytes {
                answer(.refuse("speedtest request longer than \(SpeedtestRequest.maxBytes) bytes"), context: context)
            }
        case .upload:
            metrics.uploaded.increment(by: buffer.readableBytes)
        case .download, .finished:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        switch state {
        case .request:
            // The client's EOF ends its request: answer what arrived (Go's decoder does).
            answer(SpeedtestRequest.answer(received?.readableBytesView ?? ByteBuffer().readableBytesView), context: context)
        case .upload:
            finish(context: context)
        case .download, .finished:
            break
        }
    }

    private func answer(_ answer: SpeedtestRequest.Answer, context: ChannelHandlerContext) {
        timer?.cancel()
        received = nil
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: answer.bytes)), promise: nil)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let contextBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        switch answer {
        case .refuse:
            metrics.refused.increment()
            finish(context: context)
        case .start(let request):
            let time = TimeAmount.nanoseconds(
                Int64(request.duration.components.seconds) * 1_000_000_000
                    + request.duration.components.attoseconds / 1_000_000_000)
            switch request.direction {
            case .upload:
                metrics.uploads.increment()
                state = .upload
                timer = context.eventLoop.scheduleTask(in: time + Self.uploadGrace) { bound.value.finish(context: contextBound.value) }
            case .download:
                metrics.downloads.increment()
                state = .download(deadline: context.eventLoop.now + time)
                timer = context.eventLoop.scheduleTask(in: time) { bound.value.finish(context: contextBound.value) }
                pump(context: context, first: true)
            }
        }
    }

    /// Writes blocks while the channel takes them and the time has not passed (the first
    /// block goes out whatever the time, as the reference writes before it checks).
    private func pump(context: ChannelHandlerContext, first: Bool = false) {
        // A write the socket takes at once makes the channel writable again from inside
        // writeAndFlush, and NIO calls channelWritabilityChanged there: a nested pump would
        // write the next block and then see the outer loop record an earlier block as the
        // last one, so `finish` closed with the real last block half written.
        guard !pumping else { return }
        pumping = true
        defer { pumping = false }
        var first = first
        while case .download(let deadline) = state, context.channel.isWritable {
            guard first || context.eventLoop.now < deadline else {
                finish(context: context)
                return
            }
            first = false
            lastWrite = writeBlock(context: context)
            metrics.downloaded.increment(by: block.readableBytes)
        }
    }

    /// Writes the block as slices, each of which moves ``lastProgress`` when it has gone out;
    /// returns the last slice's future.
    private func writeBlock(context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        var last: EventLoopFuture<Void>?
        var offset = 0
        while offset < block.readableBytes {
            let length = min(Self.sliceSize, block.readableBytes - offset)
            let slice = block.getSlice(at: block.readerIndex + offset, length: length)!
            let promise = context.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { bound.value.lastProgress = loop.now }
            context.write(wrapOutboundOut(slice), promise: promise)
            last = promise.futureResult
            offset += length
        }
        context.flush()
        return last ?? context.eventLoop.makeSucceededVoidFuture()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pump(context: context)
        context.fireChannelWritabilityChanged()
    }

    /// Closes once what was written has gone out, or once it has stood still for
    /// ``drainGrace``.
    private func finish(context: ChannelHandlerContext) {
        if case .finished = state { return }
        state = .finished
        timer?.cancel()
        lastProgress = max(lastProgress, context.eventLoop.now)
        watchDrain(context: context)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let contextBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let written = lastWrite ?? context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)))
        written.whenComplete { _ in
            bound.value.timer?.cancel()
            contextBound.value.close(promise: nil)
        }
    }

    /// Closes the channel once ``drainGrace`` has passed since ``lastProgress``; while the
    /// drain moves, looks again then. Ends with the channel (``timer`` is cancelled there).
    private func watchDrain(context: ChannelHandlerContext) {
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        let contextBound = NIOLoopBound(context, eventLoop: loop)
        timer = loop.scheduleTask(deadline: lastProgress + drainGrace) {
            let handler = bound.value
            if loop.now >= handler.lastProgress + handler.drainGrace {
                contextBound.value.close(promise: nil)
            } else {
                handler.watchDrain(context: contextBound.value)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        state = .finished
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
