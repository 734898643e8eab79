import AgentCore
import CAgentSpawn
import Logging
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// One reconnecting PTY (the buffered backend): a process on a terminal that outlives its
/// connections. Its output goes into a ``ReplayBuffer`` and to every attached connection;
/// each connection's input goes to the terminal. The end of the terminal's output (every
/// writer gone: the kernel hands over what they wrote first) closes every attachment and
/// forgets the ID; so does the process's exit when a background job keeps the terminal
/// open past its exit drain bound, and so does
/// ``PTYLifetime``'s expiry (the process then gets SIGHUP to its group and SIGKILL).
///
/// Everything mutable lives on `loop` (the first connection's event loop): other loops hop
/// to it. Back pressure: reading the terminal pauses while any attachment cannot take more
/// output; reading a connection pauses while the terminal cannot take more input.
final class PTYSession: ReconnectingSession {
    /// Input that arrives before the terminal's channel is open is held, at most this much.
    static let maxEarlyInput = 64 << 10
    /// What the exit bound reads from the terminal before it ends the session, at most.
    static let maxFinalDrain = 1 << 20

    struct State {
        var replay = ReplayBuffer()
        var attachments: [ObjectIdentifier: any Channel] = [:]
        /// Each attachment's last output write (a channel completes its writes in order): an
        /// ending session closes a connection once what it was sent has left.
        var lastWrites: [ObjectIdentifier: EventLoopFuture<Void>] = [:]
        /// The lifetime's armed timer (at most one: a new arming or the end cancels it, so an
        /// ended session is not held by a sleeping task for up to the idle timeout).
        var timer: Task<Void, Never>?
        var lifetime: PTYLifetime
        var terminal: (any Channel)?
        var earlyInput: [ByteBuffer] = []
        var earlyInputBytes = 0
        var pausedInputs: [ObjectIdentifier: any Channel] = [:]
        var exited = false
        var ended = false
        /// Shutdowns waiting for the exit (at most one per shutdown call).
        var exitWaiters: [EventLoopPromise<Void>] = []
    }

    let id: String
    let loop: any EventLoop
    let process: SessionProcess
    let maxAttachments: Int
    /// After the process exits, how long the session waits for the end of the terminal's
    /// output before it ends anyway (a background job holding the terminal must not keep the
    /// session; normally the end of output comes first).
    let exitDrainBound: TimeAmount
    private let state: NIOLoopBoundBox<State>
    private let sleep: @Sendable (Duration) async throws -> Void
    private let logger: Logger
    private let onEnd: @Sendable (PTYSession) -> Void

    /// Starts the relay, the waiting thread and the first timer; call on `loop`.
    init(
        id: String, loop: any EventLoop, process: SessionProcess, lifetime: PTYLifetime, maxAttachments: Int, exitDrainBound: TimeAmount,
        logger: Logger,
        sleep: @escaping @Sendable (Duration) async throws -> Void, onEnd: @escaping @Sendable (PTYSession) -> Void
    ) {
        self.id = id
        self.loop = loop
        self.process = process
        self.maxAttachments = maxAttachments
        self.exitDrainBound = exitDrainBound
        self.sleep = sleep
        self.logger = logger
        self.onEnd = onEnd
        state = NIOLoopBoundBox(State(lifetime: lifetime), eventLoop: loop)
        perform(lifetime.start)
        let session = self
        NIOPipeBootstrap(group: loop)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TerminalRelay(session: session))
                }
            }
            .takingOwnershipOfDescriptors(input: process.output, output: process.input)
            .whenComplete { result in
                switch result {
                case .success(let channel): session.terminalOpened(channel)
                case .failure(let error): session.end("the terminal could not be read: \(error)")
                }
            }
        process.onExit { _ in loop.execute { session.processExited() } }
    }

    /// Runs `body` on the session's loop: at once when already there, else queued (calls from
    /// one thread keep their order either way).
    func onLoop(_ body: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { body() } else { loop.execute(body) }
    }

    // MARK: Attachments

    /// Attaches `channel`: the replay first, then the terminal's size set to `size` (when both
    /// are non-zero), then live output. Closes `channel` when the session is full, or after the
    /// replay when it has ended.
    func attach(_ channel: any Channel, size: (rows: UInt16, columns: UInt16)) {
        onLoop { [self] in
            if state.value.ended {
                // It ended before this connection got here (a short command on a busy host):
                // what it wrote still reaches it, then the close.
                let replay = state.value.replay.contents
                logger.debug("reconnecting pty: attached to an ended session", metadata: ["id": "\(id)", "replay": "\(replay.count)"])
                Self.close(channel, after: channel.writeAndFlush(channel.allocator.buffer(bytes: replay)), within: Self.lastOutputBound)
                return
            }
            guard state.value.attachments.count < maxAttachments else {
                channel.close(promise: nil)
                return
            }
            let key = ObjectIdentifier(channel)
            state.value.attachments[key] = channel
            let replay = state.value.replay.contents
            if !replay.isEmpty { channel.writeAndFlush(channel.allocator.buffer(bytes: replay), promise: nil) }
            resize(size.rows, size.columns)
            // Attached, no timer runs (a detach arms the idle one afresh).
            state.value.timer?.cancel()
            state.value.timer = nil
            perform(state.value.lifetime.attach())
            channel.closeFuture.whenComplete { [self] _ in onLoop { self.detach(key) } }
        }
    }

    private func detach(_ key: ObjectIdentifier) {
        guard state.value.attachments.removeValue(forKey: key) != nil else { return }
        state.value.lastWrites[key] = nil
        state.value.pausedInputs[key] = nil
        resumeTerminalIfWritable()
        perform(state.value.lifetime.detach())
    }

    /// A connection's input object: its data to the terminal, then its size.
    func input(_ input: PTYInput, from channel: any Channel) {
        onLoop { [self] in
            // Only an attached connection types: one refused (``maxAttachments``) is closing,
            // and the rest of its first read must not reach the terminal.
            guard !state.value.ended, state.value.attachments[ObjectIdentifier(channel)] != nil else { return }
            if !input.data.isEmpty {
                let bytes = channel.allocator.buffer(string: input.data)
                if let terminal = state.value.terminal {
                    terminal.writeAndFlush(bytes, promise: nil)
                    if !terminal.isWritable {
                        state.value.pausedInputs[ObjectIdentifier(channel)] = channel
                        _ = channel.setOption(ChannelOptions.autoRead, value: false)
                    }
                } else if state.value.earlyInputBytes + bytes.readableBytes <= Self.maxEarlyInput {
                    state.value.earlyInput.append(bytes)
                    state.value.earlyInputBytes += bytes.readableBytes
                }
            }
            if let size = input.size { resize(size.rows, size.columns) }
        }
    }

    private func resize(_ rows: UInt16, _ columns: UInt16) {
        guard rows != 0, columns != 0, !state.value.ended else { return }
        _ = agent_pty_resize(process.output, rows, columns)
    }

    /// An attachment can take output again: the terminal is read again once all can.
    func attachmentWritable(_ channel: any Channel) {
        onLoop { [self] in resumeTerminalIfWritable() }
    }

    private func resumeTerminalIfWritable() {
        guard let terminal = state.value.terminal, state.value.attachments.values.allSatisfy(\.isWritable) else { return }
        _ = terminal.setOption(ChannelOptions.autoRead, value: true)
    }

    // MARK: The terminal

    private func terminalOpened(_ channel: any Channel) {
        guard !state.value.ended else {
            channel.close(promise: nil)
            return
        }
        state.value.terminal = channel
        for bytes in state.value.earlyInput { channel.write(bytes, promise: nil) }
        channel.flush()
        state.value.earlyInput = []
        state.value.earlyInputBytes = 0
        // A process that ended before its terminal was open still has its output read.
        if state.value.exited { scheduleExitBound() }
    }

    /// Output: kept for replays and written to every attachment.
    fileprivate func output(_ buffer: ByteBuffer, from terminal: any Channel) {
        guard !state.value.ended else { return }
        state.value.replay.append(buffer.readableBytesView)
        var full = false
        for (key, channel) in state.value.attachments {
            state.value.lastWrites[key] = channel.writeAndFlush(buffer)
            if !channel.isWritable { full = true }
        }
        if full { _ = terminal.setOption(ChannelOptions.autoRead, value: false) }
    }

    fileprivate func terminalWritable() {
        for channel in state.value.pausedInputs.values {
            channel.setOption(ChannelOptions.autoRead, value: true).whenSuccess { channel.read() }
        }
        state.value.pausedInputs = [:]
    }

    fileprivate func outputEnded(_ why: String) {
        end(why)
    }

    private func processExited() {
        state.value.exited = true
        let waiters = state.value.exitWaiters
        state.value.exitWaiters = []
        for waiter in waiters { waiter.succeed() }
        // The bound starts once the terminal is open (``terminalOpened``), so what the
        // process wrote is read even when it ended first.
        guard !state.value.ended, state.value.terminal != nil else { return }
        scheduleExitBound()
    }

    /// Ends the session ``exitDrainBound`` after the exit unless the output's end came first;
    /// what the terminal holds then is read first (``drainTerminal()``).
    private func scheduleExitBound() {
        loop.scheduleTask(in: exitDrainBound) { [self] in
            guard !state.value.ended else { return }
            drainTerminal()
            end("exited; the terminal was still open")
        }
    }

    /// Reads what the terminal holds now (at most ``maxFinalDrain`` bytes): a loop that was
    /// late (blocked in another channel's handler) may not have polled the terminal since the
    /// process wrote its last output. On the loop, with the channel open (the session has not
    /// ended), as ``SessionProcess/readHeldOutput(maxBytes:_:)`` asks.
    private func drainTerminal() {
        guard let terminal = state.value.terminal else { return }
        process.readHeldOutput(maxBytes: Self.maxFinalDrain) { bytes in
            output(terminal.allocator.buffer(bytes: bytes), from: terminal)
        }
    }

    // MARK: Lifetime

    private func perform(_ action: PTYLifetime.Action) {
        if case .arm = action { state.value.timer?.cancel() }
        let armed = action.run(
            sleep: sleep, fired: { [self] generation in onLoop { self.perform(self.state.value.lifetime.timerFired(generation: generation)) } },
            expire: { terminate() })
        if let armed {
            if state.value.ended { armed.cancel() } else { state.value.timer = armed }
        }
    }

    /// Ends the session and its process (expiry, the agent's shutdown).
    @discardableResult
    func terminate() -> EventLoopFuture<Void> {
        loop.submit { [self] in
            if !state.value.exited {
                process.signalGroup(SIGHUP)
                process.signalChild(SIGKILL)
            }
            end("terminated")
        }
    }

    /// The agent's shutdown: SIGHUP and SIGTERM to every process group of the session (an
    /// interactive shell's jobs have groups of their own), SIGKILL to them `grace` later if
    /// the shell has not exited by then (docs/limits.md: TERM, then KILL after 5 s, for
    /// everything the agent started). Completes at the exit or at the kill.
    func shutdown(grace: TimeAmount) -> EventLoopFuture<Void> {
        let done = loop.makePromise(of: Void.self)
        onLoop { [self] in
            guard !state.value.exited else {
                end("terminated")
                done.succeed()
                return
            }
            process.signalSession(SIGHUP)
            process.signalSession(SIGTERM)
            state.value.exitWaiters.append(done)
            end("terminated")
            loop.scheduleTask(in: grace) { [self] in
                guard !state.value.exited else { return }
                process.signalSession(SIGKILL)
                state.value.exitWaiters.removeAll { $0.futureResult === done.futureResult }
                done.succeed()
            }
        }
        return done.futureResult
    }

    /// Closes every attachment and the terminal, and forgets the ID.
    private func end(_ why: String) {
        guard !state.value.ended else { return }
        state.value.ended = true
        logger.debug("reconnecting pty: session ended", metadata: ["id": "\(id)", "why": "\(why)", "attachments": "\(state.value.attachments.count)", "replay": "\(state.value.replay.contents.count)"])
        for (key, channel) in state.value.attachments {
            if let pending = state.value.lastWrites[key] {
                Self.close(channel, after: pending, within: Self.lastOutputBound)
            } else {
                channel.close(promise: nil)
            }
        }
        state.value.attachments = [:]
        state.value.lastWrites = [:]
        state.value.timer?.cancel()
        state.value.timer = nil
        state.value.terminal?.close(promise: nil)
        onEnd(self)
    }

    /// How long a connection has to take an ended session's last output (its replay, up to
    /// 64 KiB, included) before it is closed: a slow client over a relay still gets it whole.
    static let lastOutputBound: TimeAmount = .seconds(30)

    /// Closes `channel` once `written` (its last output) completes, or `bound` after now if
    /// the client does not read it: a connection that stops reading must not keep its place
    /// (and the ended session) for ever.
    static func close(_ channel: any Channel, after written: EventLoopFuture<Void>, within bound: TimeAmount) {
        let deadline = channel.eventLoop.scheduleTask(in: bound) { channel.close(promise: nil) }
        written.whenComplete { _ in
            deadline.cancel()
            channel.close(promise: nil)
        }
    }

    /// The attachments now (for tests and the stats), read on the loop.
    var attachmentCount: EventLoopFuture<Int> {
        loop.submit { [self] in state.value.attachments.count }
    }
}

/// Reads the terminal's primary side into its session.
private final class TerminalRelay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let session: PTYSession

    init(session: PTYSession) { self.session = session }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        session.output(unwrapInboundIn(data), from: context.channel)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { session.terminalWritable() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { session.outputEnded("end of output") }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        session.outputEnded("terminal closed")
        context.fireChannelInactive()
    }

    /// A terminal whose last writer closed reads as EIO: the end of its output.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        session.outputEnded("terminal: \(error)")
        context.close(promise: nil)
    }
}
