import AgentCore
import CAgentSpawn
import Logging
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// One reconnecting PTY served by GNU screen: a screen session named by ``ScreenControl``
/// (8 random hex characters) runs the command, and each connection gets a screen client of
/// its own, `screen -S <name> -UxRRqc <config> <argv...>` on a terminal of the init's size
/// (the first one starts the session; screen's own redraw replaces the replay buffer).
///
/// - Attaches are serialised: a client is spawned only once the previous one's session
///   answers `screen -X version` (screen starts two sessions under one name when clients
///   race). A connection's input waits (held, at most ``maxEarlyInput``) until then.
/// - A connection's end kills its client alone; the session lives on.
/// - A client that ends by itself (the command exited, or screen's own quit) closes its
///   connection; when screen then says the session is gone, the session ends.
/// - Expiry (``PTYLifetime``) and the agent's shutdown end the session: every client is
///   killed and the session quit (`screen -X quit`, retried by ``ScreenCommandPoll``). The
///   agent quits only the sessions it created, by the names it gave them.
///
/// Everything mutable lives on `loop`; each client's terminal is a channel on it too.
final class ScreenSession: ReconnectingSession {
    /// Input held per connection until its client is up.
    static let maxEarlyInput = PTYSession.maxEarlyInput
    /// How often a starting client's terminal is checked for raw mode (within
    /// ``ScreenCommandPoll/limit``).
    static let rawModeInterval: Duration = .milliseconds(10)
    /// After a client ends by itself, how long screen is asked whether its session is gone
    /// (a client detached by the user's `^S d` leaves it running; the lifetime ends it then).
    static let endCheckLimit: Duration = .seconds(5)

    struct Client {
        /// Tells this client's events from those of an earlier one of the same key.
        let serial: Int
        let connection: any Channel
        let size: (rows: UInt16, columns: UInt16)
        var process: SessionProcess?
        var terminal: (any Channel)?
        var pendingSize: (rows: UInt16, columns: UInt16)?
        var ready = false
        var exited = false
        /// The client ended by itself (not killed for its connection's end).
        var endedByItself = false
        var earlyInput: [ByteBuffer] = []
        var earlyInputBytes = 0
        var inputPaused = false
    }

    struct State {
        var lifetime: PTYLifetime
        /// The lifetime's armed timer: at most one (attaching, a new arming and the end
        /// cancel it).
        var timer: Task<Void, Never>?
        var clients: [ObjectIdentifier: Client] = [:]
        /// Connections waiting for their client, oldest first.
        var waiting: [ObjectIdentifier] = []
        /// The connection whose client is starting now.
        var attaching: ObjectIdentifier?
        var nextSerial = 0
        var ended = false
    }

    let id: String
    let loop: any EventLoop
    let control: ScreenControl
    /// What the session runs (the shell, or the init's command through it).
    let command: [String]
    let maxAttachments: Int
    /// How long a client that exited has for the output it left (as ``PTYSession``'s).
    let exitDrainBound: TimeAmount
    let logger: Logger
    private let state: NIOLoopBoundBox<State>
    private let sleep: @Sendable (Duration) async throws -> Void
    private let countError: @Sendable (String) -> Void
    private let onEnd: @Sendable (ScreenSession) -> Void
    private let finished: EventLoopPromise<Void>

    /// Arms the first timer; the session itself starts with the first attach. Call on `loop`.
    init(
        id: String, loop: any EventLoop, control: ScreenControl, command: [String], lifetime: PTYLifetime, maxAttachments: Int,
        exitDrainBound: TimeAmount, logger: Logger, sleep: @escaping @Sendable (Duration) async throws -> Void, countError: @escaping @Sendable (String) -> Void,
        onEnd: @escaping @Sendable (ScreenSession) -> Void
    ) {
        self.id = id
        self.loop = loop
        self.control = control
        self.command = command
        self.maxAttachments = maxAttachments
        self.exitDrainBound = exitDrainBound
        self.logger = logger
        self.sleep = sleep
        self.countError = countError
        self.onEnd = onEnd
        finished = loop.makePromise()
        state = NIOLoopBoundBox(State(lifetime: lifetime), eventLoop: loop)
        perform(lifetime.start)
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if loop.inEventLoop { body() } else { loop.execute(body) }
    }

    // MARK: Attachments

    func attach(_ channel: any Channel, size: (rows: UInt16, columns: UInt16)) {
        onLoop { [self] in
            guard !state.value.ended, state.value.clients.count < maxAttachments else {
                channel.close(promise: nil)
                return
            }
            let key = ObjectIdentifier(channel)
            state.value.nextSerial += 1
            state.value.clients[key] = Client(serial: state.value.nextSerial, connection: channel, size: size)
            state.value.waiting.append(key)
            // Its input waits in the socket until its client is up.
            _ = channel.setOption(ChannelOptions.autoRead, value: false)
            state.value.timer?.cancel()
            state.value.timer = nil
            perform(state.value.lifetime.attach())
            channel.closeFuture.whenComplete { [self] _ in onLoop { self.detach(key) } }
            startNextClient()
        }
    }

    /// Spawns the client of the oldest waiting connection, unless one is starting now.
    private func startNextClient() {
        guard state.value.attaching == nil, !state.value.ended else { return }
        while !state.value.waiting.isEmpty {
            let key = state.value.waiting.removeFirst()
            guard let client = state.value.clients[key] else { continue }
            let process: SessionProcess
            do throws(SessionProcess.SpawnError) {
                process = try SessionProcess.spawn(
                    argv: [control.program, "-S", control.name, "-UxRRqc", control.directory.config] + command,
                    environment: { [control] _ in control.environment }, directory: control.workingDirectory,
                    terminal: (client.size.rows == 0 ? 24 : client.size.rows, client.size.columns == 0 ? 80 : client.size.columns))
            } catch {
                logger.warning("reconnecting pty: screen did not start", metadata: ["error": "\(error)"])
                countError("screen_spawn")
                client.connection.close(promise: nil)
                continue
            }
            state.value.clients[key]?.process = process
            state.value.attaching = key
            startClient(key, serial: client.serial, process: process)
            return
        }
    }

    private func startClient(_ key: ObjectIdentifier, serial: Int, process: SessionProcess) {
        let session = self
        NIOPipeBootstrap(group: loop)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScreenClientRelay(session: session, key: key, serial: serial))
                }
            }
            .takingOwnershipOfDescriptors(input: process.output, output: process.input)
            .whenComplete { result in
                switch result {
                case .success(let channel): session.terminalOpened(channel, key: key, serial: serial)
                case .failure: session.clientEnded(key, serial: serial)
                }
            }
        let loop = self.loop
        process.onExit { _ in loop.execute { session.clientExited(key, serial: serial) } }
        let control = self.control
        Task {
            let reply = await control.poll(
                "version", until: { $0 == .done },
                stop: { await (try? loop.submit { session.isStarting(key, serial: serial) }.get()) != true })
            if reply == .done {
                // The client reads its terminal only once it has made it raw: keys written
                // before that are echoed by the terminal and dropped, so input waits for it.
                var waited = Duration.zero
                while waited < ScreenCommandPoll.limit,
                    await (try? loop.submit { session.isCanonical(key, serial: serial) }.get()) == true
                {
                    guard (try? await Task.sleep(for: Self.rawModeInterval)) != nil else { break }
                    waited += Self.rawModeInterval
                }
            }
            session.onLoop { session.clientPolled(key, serial: serial, reply: reply) }
        }
    }

    /// Whether a starting client's terminal is still in line mode (screen has not taken it).
    private func isCanonical(_ key: ObjectIdentifier, serial: Int) -> Bool {
        guard isStarting(key, serial: serial), let process = client(key, serial)?.process else { return false }
        return agent_pty_is_canonical(process.output) == 1
    }

    private func client(_ key: ObjectIdentifier, _ serial: Int) -> Client? {
        guard let client = state.value.clients[key], client.serial == serial else { return nil }
        return client
    }

    private func isStarting(_ key: ObjectIdentifier, serial: Int) -> Bool {
        !state.value.ended && state.value.attaching == key && client(key, serial) != nil
    }

    private func clientPolled(_ key: ObjectIdentifier, serial: Int, reply: ScreenControl.Reply) {
        // A client that went away meanwhile has already let the next one start.
        guard isStarting(key, serial: serial), let client = client(key, serial) else { return }
        state.value.attaching = nil
        if reply == .done {
            state.value.clients[key]?.ready = true
            flushEarlyInput(key)
            let connection = client.connection
            connection.setOption(ChannelOptions.autoRead, value: true).whenSuccess { connection.read() }
        } else {
            logger.warning("reconnecting pty: the screen session did not answer", metadata: ["error": "\(reply)"])
            countError("screen_wait")
            client.connection.close(promise: nil)
        }
        startNextClient()
    }

    /// A connection's end: its client is killed (the session lives on); or the client's end.
    private func detach(_ key: ObjectIdentifier) {
        guard let client = state.value.clients.removeValue(forKey: key) else { return }
        state.value.waiting.removeAll { $0 == key }
        if let process = client.process, !client.exited { process.signalChild(SIGKILL) }
        client.terminal?.close(promise: nil)
        if state.value.attaching == key {
            state.value.attaching = nil
            startNextClient()
        }
        perform(state.value.lifetime.detach())
        if client.endedByItself { checkSessionGone() }
    }

    func input(_ input: PTYInput, from channel: any Channel) {
        onLoop { [self] in
            let key = ObjectIdentifier(channel)
            // The record is changed in place, never written back from this copy: a write to
            // the terminal can end the client from inside it (EIO from an exited screen client
            // closes the terminal, and ``clientEnded`` marks the record).
            guard !state.value.ended, let client = state.value.clients[key] else { return }
            if !input.data.isEmpty {
                let bytes = channel.allocator.buffer(string: input.data)
                if client.ready, let terminal = client.terminal {
                    terminal.writeAndFlush(bytes, promise: nil)
                    if !terminal.isWritable {
                        state.value.clients[key]?.inputPaused = true
                        _ = channel.setOption(ChannelOptions.autoRead, value: false)
                    }
                } else if client.earlyInputBytes + bytes.readableBytes <= Self.maxEarlyInput {
                    state.value.clients[key]?.earlyInput.append(bytes)
                    state.value.clients[key]?.earlyInputBytes += bytes.readableBytes
                }
            }
            if let size = input.size {
                if let terminal = client.terminal, terminal.isActive, let process = client.process {
                    _ = agent_pty_resize(process.output, size.rows, size.columns)
                } else {
                    state.value.clients[key]?.pendingSize = size
                }
            }
        }
    }

    /// Writes what a connection typed before its client was up, once the client is up and
    /// its terminal open.
    private func flushEarlyInput(_ key: ObjectIdentifier) {
        guard let client = state.value.clients[key], client.ready, let terminal = client.terminal else { return }
        for bytes in client.earlyInput { terminal.write(bytes, promise: nil) }
        terminal.flush()
        state.value.clients[key]?.earlyInput = []
        state.value.clients[key]?.earlyInputBytes = 0
    }

    func attachmentWritable(_ channel: any Channel) {
        onLoop { [self] in
            guard let client = state.value.clients[ObjectIdentifier(channel)], client.connection.isWritable else { return }
            _ = client.terminal?.setOption(ChannelOptions.autoRead, value: true)
        }
    }

    // MARK: Each client's terminal

    private func terminalOpened(_ terminal: any Channel, key: ObjectIdentifier, serial: Int) {
        guard !state.value.ended, var client = client(key, serial) else {
            terminal.close(promise: nil)
            return
        }
        client.terminal = terminal
        if let size = client.pendingSize, let process = client.process {
            _ = agent_pty_resize(process.output, size.rows, size.columns)
            client.pendingSize = nil
        }
        state.value.clients[key] = client
        flushEarlyInput(key)
    }

    /// The client's output goes to its connection alone.
    fileprivate func clientOutput(_ buffer: ByteBuffer, key: ObjectIdentifier, serial: Int, terminal: any Channel) {
        guard let client = client(key, serial) else { return }
        client.connection.writeAndFlush(buffer, promise: nil)
        if !client.connection.isWritable { _ = terminal.setOption(ChannelOptions.autoRead, value: false) }
    }

    fileprivate func clientTerminalWritable(_ key: ObjectIdentifier, serial: Int) {
        guard var client = client(key, serial), client.inputPaused else { return }
        client.inputPaused = false
        state.value.clients[key] = client
        let connection = client.connection
        connection.setOption(ChannelOptions.autoRead, value: true).whenSuccess { connection.read() }
    }

    /// The client's terminal reached its end: its connection closes.
    fileprivate func clientEnded(_ key: ObjectIdentifier, serial: Int) {
        guard let client = client(key, serial) else { return }
        state.value.clients[key]?.endedByItself = true
        client.connection.close(promise: nil)
    }

    /// The client has exited (and was reaped): its connection closes once the output it left
    /// is read, or after ``exitDrainBound``.
    private func clientExited(_ key: ObjectIdentifier, serial: Int) {
        guard let client = client(key, serial) else { return }
        state.value.clients[key]?.exited = true
        state.value.clients[key]?.endedByItself = true
        let connection = client.connection
        loop.scheduleTask(in: exitDrainBound) { connection.close(promise: nil) }
    }

    /// A client that ended by itself may have seen the session end (its command exited):
    /// when screen says the session is gone, the session ends.
    private func checkSessionGone() {
        guard !state.value.ended else { return }
        let control = self.control
        Task {
            // A session whose command ended still answers for a moment while it exits.
            var waited = Duration.zero
            var reply = await control.run("version")
            while reply != .noSession, waited < Self.endCheckLimit {
                guard (try? await Task.sleep(for: ScreenCommandPoll.interval)) != nil else { return }
                waited += ScreenCommandPoll.interval
                reply = await control.run("version")
            }
            if reply == .noSession {
                self.onLoop {
                    self.logger.debug("reconnecting pty: the screen session ended", metadata: ["id": "\(self.id)"])
                    self.end()
                }
            }
        }
    }

    // MARK: Lifetime

    private func perform(_ action: PTYLifetime.Action) {
        if case .arm = action { state.value.timer?.cancel() }
        let armed = action.run(
            sleep: sleep, fired: { [self] generation in onLoop { self.perform(self.state.value.lifetime.timerFired(generation: generation)) } },
            expire: {
                logger.debug("reconnecting pty timeout", metadata: ["id": "\(id)"])
                end()
            })
        if let armed {
            if state.value.ended { armed.cancel() } else { state.value.timer = armed }
        }
    }

    @discardableResult
    func terminate() -> EventLoopFuture<Void> {
        onLoop { [self] in end() }
        return finished.futureResult
    }

    /// Kills every client, closes every connection, forgets the ID and quits the session.
    private func end() {
        guard !state.value.ended else { return }
        state.value.ended = true
        state.value.timer?.cancel()
        state.value.timer = nil
        let clients = state.value.clients.values
        state.value.clients = [:]
        state.value.waiting = []
        state.value.attaching = nil
        for client in clients {
            if let process = client.process, !client.exited { process.signalChild(SIGKILL) }
            client.terminal?.close(promise: nil)
            client.connection.close(promise: nil)
        }
        onEnd(self)
        let (control, logger, countError, finished) = (self.control, self.logger, self.countError, self.finished)
        Task {
            let reply = await control.quit()
            if reply != .noSession {
                logger.error("reconnecting pty: could not quit the screen session", metadata: ["error": "\(reply)"])
                countError("screen_quit")
            }
            finished.succeed()
        }
    }

    /// The connections attached now (for tests), read on the loop.
    var attachmentCount: EventLoopFuture<Int> {
        loop.submit { [self] in state.value.clients.count }
    }
}

/// Reads one screen client's terminal into its connection.
private final class ScreenClientRelay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let session: ScreenSession
    let key: ObjectIdentifier
    let serial: Int

    init(session: ScreenSession, key: ObjectIdentifier, serial: Int) {
        self.session = session
        self.key = key
        self.serial = serial
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        session.clientOutput(unwrapInboundIn(data), key: key, serial: serial, terminal: context.channel)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { session.clientTerminalWritable(key, serial: serial) }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { session.clientEnded(key, serial: serial) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        session.clientEnded(key, serial: serial)
        context.fireChannelInactive()
    }

    /// A terminal whose last writer closed reads as EIO: the end of its output.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        session.clientEnded(key, serial: serial)
        context.close(promise: nil)
    }
}
