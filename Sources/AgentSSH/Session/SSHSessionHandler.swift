import AgentCore
import CAgentSpawn
import FoundationEssentials
import Logging
import NIOCore
import NIOPosix
import NIOSSH
#if canImport(Glibc)
import Glibc
#endif

/// One `session` channel: collects `env` and `pty-req`, runs the shell or command at `shell`
/// or `exec`, relays its terminal or its three pipes both ways with back pressure, passes
/// `window-change` and `signal` on, and ends with `exit-status` (or, beyond the reference,
/// `exit-signal` for a process killed by a signal) and the channel's close.
///
/// The channel closing before the process ended (the client went) sends SIGHUP to the
/// process's group, as OpenSSH's closing terminal does: a `nohup` or `setsid` child lives on.
/// Until it is reaped the process stays in ``SessionRegistry``, whose shutdown ends it.
final class SSHSessionHandler: ChannelDuplexHandler {
    typealias InboundIn = SSHChannelData
    typealias InboundOut = SSHChannelData
    typealias OutboundIn = SSHChannelData
    typealias OutboundOut = SSHChannelData

    /// Signals a client sends before its process runs are kept, at most this many.
    static let maxPendingSignals = 128
    /// After a terminal's process exits, how long the session waits for the end of the
    /// terminal's output (normally at once: the exit hangs the terminal up) before it reads
    /// what the terminal still holds and ends anyway (a background job holding the terminal
    /// must not keep the session).
    static let terminalDrain: TimeAmount = .seconds(2)
    /// What the end after ``terminalDrain`` reads from the terminal, at most.
    static let maxFinalDrain = 1 << 20

    let environment: SessionEnvironmentBuilder
    /// The manifest's message-of-the-day file ("" for none).
    var motdFile = ""
    /// The control plane's announcement banners, shown to login shells before the MOTD.
    var banners = AnnouncementBanners()
    let policy: SSHPolicy
    let directory: String
    let logger: Logger
    let sessions: SessionRegistry
    /// The stats report's counts: a session counts under its type (`CODER_SSH_SESSION_TYPE`
    /// as the client named it, normalized; `ssh` without one); JetBrains sessions are not
    /// counted as sessions (their forwards are: the reference's rule).
    let counts: SessionCounts
    private var counted: String?
    /// Where connection reports go, and this session's CONNECT (for its DISCONNECT).
    let upward: any UpwardSink
    private var connectReport: ConnectionReport?

    private var context: ChannelHandlerContext?
    private var clientVariables: [(name: String, value: String)] = []
    /// Their names and values, in bytes (at most ``SessionEnvironmentBuilder/maxClientVariablesTotal``).
    private var clientVariableBytes = 0
    private var terminal: SSHChannelRequestEvent.PseudoTerminalRequest?
    private var process: SessionProcess?
    /// The terminal's primary side while it is open. Its relay closes it (the reading side
    /// at the end of output, while the channel may stay open), after which the number may
    /// be another descriptor's: a resize or an end-of-file character must not reach that.
    private var terminalDescriptor: Int32?
    private var started = false
    private var pendingSignals: [Int32] = []
    /// The relays of the process's output (stdout and stderr, or the terminal) still open.
    /// Where client bytes go: the stdin pipe's or the terminal's channel.
    private var inputChannel: (any Channel)?
    private var outputChannels: [any Channel] = []
    /// The last output write handed to the client's channel (NIO completes a channel's
    /// writes in order, so when it completes every earlier one has): the exit status and
    /// the close wait for it, as the reference's copy ends before it sends them.
    private var lastOutputWrite: EventLoopFuture<Void>?
    /// A file transfer was refused (`--block-file-transfer`): its disconnect says so.
    private var transferBlocked = false
    /// Start, exit, output drained, exit status, close (``SSHSessionLife``).
    private var life = SSHSessionLife()
    private var sessionID: Int?
    /// `ssh -A` and `ssh -X` for this session, and `keepalive@openssh.com` answers.
    private var forwarding: SessionForwarding?

    init(
        environment: SessionEnvironmentBuilder, directory: String, policy: SSHPolicy = SSHPolicy(), sessions: SessionRegistry,
        counts: SessionCounts, upward: any UpwardSink = DiscardingUpward(), logger: Logger
    ) {
        self.upward = upward
        self.policy = policy
        self.counts = counts
        self.environment = environment
        self.directory = directory
        self.sessions = sessions
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        forwarding = SessionForwarding(channel: context.channel, environment: environment.agent, logger: logger)
        _ = context.channel.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Requests

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let request as SSHChannelRequestEvent.EnvironmentRequest where SSHExtensionMarker.isMarked(request.name):
            reply(request.wantReply, forwarding?.request(name: request.name, value: request.value, started: started) ?? false, context)
        case let request as SSHChannelRequestEvent.EnvironmentRequest:
            let size = request.name.utf8.count + request.value.utf8.count
            let accepted =
                !started && clientVariables.count < SessionEnvironmentBuilder.maxClientVariables
                && size <= SessionEnvironmentBuilder.maxClientVariableBytes
                && clientVariableBytes + size <= SessionEnvironmentBuilder.maxClientVariablesTotal
            if accepted {
                clientVariables.append((request.name, request.value))
                clientVariableBytes += size
            }
            reply(request.wantReply, accepted, context)
        case let request as SSHChannelRequestEvent.PseudoTerminalRequest:
            let accepted = !started && terminal == nil
            if accepted { terminal = request }
            reply(request.wantReply, accepted, context)
        case let request as SSHChannelRequestEvent.ShellRequest:
            if terminal != nil, !started { showGreeting(context: context) }
            reply(request.wantReply, start(argv: SessionCommand(shell: environment.shell, command: nil).argv, context: context), context)
        case let request as SSHChannelRequestEvent.ExecRequest:
            if policy.blockFileTransfer, SSHPolicy.isFileTransfer(request.command) {
                reply(request.wantReply, refuseFileTransfer(message: true, context: context), context)
                return
            }
            // An empty command is a login shell too, greeted as one.
            if terminal != nil, !started, request.command.isEmpty { showGreeting(context: context) }
            let argv = SessionCommand(shell: environment.shell, command: request.command).argv
            reply(request.wantReply, start(argv: argv, context: context), context)
        case let request as SSHChannelRequestEvent.SubsystemRequest:
            // Only `sftp` (which `scp` uses too), served by OpenSSH's own sftp-server.
            guard request.subsystem == "sftp", let server = Self.sftpServer else {
                reply(request.wantReply, false, context)
                return
            }
            if policy.blockFileTransfer {
                reply(request.wantReply, refuseFileTransfer(message: false, context: context), context)
                return
            }
            reply(request.wantReply, start(argv: [server], terminal: false, context: context), context)
        case let request as SSHChannelRequestEvent.WindowChangeRequest:
            if let terminalDescriptor {
                _ = agent_pty_resize(
                    terminalDescriptor, UInt16(clamping: request.terminalRowHeight), UInt16(clamping: request.terminalCharacterWidth))
            }
        case let request as SSHChannelRequestEvent.SignalRequest:
            let number = Self.signalNumber(request.signal)
            if let process {
                process.signalChild(number)
            } else if pendingSignals.count < Self.maxPendingSignals {
                pendingSignals.append(number)
            }
        case let event as ChannelEvent where event == .inputClosed:
            clientFinishedInput()
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func reply(_ wanted: Bool, _ success: Bool, _ context: ChannelHandlerContext) {
        guard wanted else { return }
        if success {
            context.triggerUserOutboundEvent(ChannelSuccessEvent(), promise: nil)
        } else {
            context.triggerUserOutboundEvent(ChannelFailureEvent(), promise: nil)
        }
    }

    /// OpenSSH's SFTP server (Debian's openssh-sftp-server), when installed.
    static let sftpServer: String? = ["/usr/lib/openssh/sftp-server", "/usr/libexec/sftp-server", "/usr/libexec/openssh/sftp-server"]
        .first { access($0, X_OK) == 0 }

    /// Starts the session's process (in the terminal the client asked for, unless
    /// `terminal` is false: SFTP never gets one); false (a failure reply) for a second start.
    /// A process that cannot start ends the channel with status 1 and the reason on its
    /// error stream.
    private func start(argv: [String], terminal useTerminal: Bool = true, context: ChannelHandlerContext) -> Bool {
        guard !started else { return false }
        if !useTerminal { terminal = nil }
        started = true
        guard let id = sessions.open() else {
            // A failure reply first: a client that waits for it must not hang.
            failAfterReply("too many SSH sessions (at most \(sessions.maxSessions))", context: context)
            return false
        }
        sessionID = id
        if SessionEnvironmentBuilder.sessionType(client: clientVariables) != "jetbrains" {
            counted = counts.started(named: SessionEnvironmentBuilder.sessionName(client: clientVariables))
        }
        reportConnect(type: SessionEnvironmentBuilder.sessionType(client: clientVariables), context: context)
        let size = terminal.map { (rows: UInt16(clamping: $0.terminalRowHeight), columns: UInt16(clamping: $0.terminalCharacterWidth)) }
        let spawned: SessionProcess
        do {
            spawned = try SessionProcess.spawn(
                argv: argv,
                environment: { [environment, clientVariables, terminal, forwarded = forwarding?.variables ?? [:]] tty in
                    environment.build(client: clientVariables, terminal: terminal.map { ($0.term, tty ?? "") })
                        .merging(forwarded) { _, forwarded in forwarded }
                },
                directory: directory, terminal: size,
                prepareTerminal: { [terminal] primary in
                    // The client's terminal modes (ECHO, ICANON, the control characters, ...),
                    // set before the process starts, as the reference's pty does.
                    for (opcode, value) in terminal?.terminalModes.modeMapping ?? [:] {
                        _ = agent_pty_set_mode(primary, Int32(opcode.rawValue), value.rawValue)
                    }
                })
        } catch {
            failAfterReply(error.description, context: context)
            return true
        }
        process = spawned
        if terminal != nil { terminalDescriptor = spawned.output }
        sessions.track(spawned.pid)
        for signal in pendingSignals { spawned.signalChild(signal) }
        pendingSignals = []
        relay(spawned, context: context)
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        // On the shared reactor: reaped by the time this runs (after `track`, registered above).
        spawned.onExit { [sessions] status in
            sessions.reaped(spawned.pid)
            loop.execute { bound.value.processExited(status) }
        }
        return true
    }

    /// The greeting of a login shell in a terminal (``LoginGreeting``): the announcement
    /// banners, then the message of the day.
    private func showGreeting(context: ChannelHandlerContext) {
        let home = environment.agent["HOME"] ?? SessionCommand.homeDirectory(environment: environment.agent)
        let text = LoginGreeting.text(banners: banners.current, motd: LoginGreeting.motd(file: motdFile, home: home))
        guard !text.isEmpty else { return }
        let out = context.channel.allocator.buffer(string: text)
        context.writeAndFlush(wrapOutboundOut(SSHChannelData(type: .channel, data: .byteBuffer(out))), promise: nil)
    }

    /// `--block-file-transfer`: the reference's message on stdout (for commands), status 65.
    private func refuseFileTransfer(message: Bool, context: ChannelHandlerContext) -> Bool {
        guard !started else { return false }
        started = true
        // In the connection log as the reference has it: connected, then disconnected with
        // 65 and "file transfer blocked".
        reportConnect(type: SessionEnvironmentBuilder.sessionType(client: clientVariables), context: context)
        transferBlocked = true
        if message {
            let text = context.channel.allocator.buffer(string: SSHPolicy.fileTransferMessage)
            context.writeAndFlush(wrapOutboundOut(SSHChannelData(type: .channel, data: .byteBuffer(text))), promise: nil)
        }
        life.endWithoutProcess(status: SSHPolicy.fileTransferStatus << 8)
        // After the request's reply, which the caller sends next.
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute { bound.value.finishAfterDrain() }
        return true
    }

    /// ``fail(_:context:)`` once the request's reply, which the caller sends next, is out
    /// (a reply after the close would never be sent).
    private func failAfterReply(_ reason: String, context: ChannelHandlerContext) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            guard let context = bound.value.context else { return }
            bound.value.fail(reason, context: context)
        }
    }

    /// The process could not start: the reason on stderr, exit status 1, close.
    private func fail(_ reason: String, context: ChannelHandlerContext) {
        logger.warning("ssh session did not start", metadata: ["error": "\(reason)"])
        let text = context.channel.allocator.buffer(string: reason + "\r\n")
        context.writeAndFlush(wrapOutboundOut(SSHChannelData(type: .stdErr, data: .byteBuffer(text))), promise: nil)
        life.endWithoutProcess(status: 1 << 8)
        perform(life.finishNow(), context: context)
    }

    // MARK: Relays

    private func relay(_ process: SessionProcess, context: ChannelHandlerContext) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        func bootstrap(_ type: SSHChannelData.DataType) -> NIOPipeBootstrap {
            NIOPipeBootstrap(group: context.eventLoop)
                .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(OutputRelay(session: bound, type: type))
                    }
                }
        }
        life.processStarted(terminal: terminal != nil)
        // A relay that cannot be set up ends its output unread: said in the log, as the
        // client then gets the exit status without that output.
        let logger = logger
        let failed: @Sendable (any Error) -> Void = { error in
            logger.warning("ssh session output relay failed", metadata: ["error": "\(error)"])
            bound.value.outputEnded()
        }
        // The terminal, or the output and input pipes; stderr's pipe apart when there is no terminal.
        let main = bootstrap(.channel).takingOwnershipOfDescriptors(input: process.output, output: process.input)
        main.whenSuccess { channel in bound.value.attached(output: channel, input: true) }
        main.whenFailure(failed)
        if terminal == nil {
            let errors = bootstrap(.stdErr).takingOwnershipOfDescriptor(input: process.errors)
            errors.whenSuccess { channel in bound.value.attached(output: channel, input: false) }
            errors.whenFailure(failed)
        }
    }

    func attached(output channel: any Channel, input: Bool) {
        outputChannels.append(channel)
        // A terminal whose process ended before it was open drains from now.
        if let context { perform(life.outputAttached(), context: context) }
        if input {
            inputChannel = channel
            try? channel.pipeline.syncOperations.addHandler(InputWatch(session: NIOLoopBound(self, eventLoop: channel.eventLoop)))
        }
        if life.ended { channel.close(promise: nil) }
    }

    /// Output from the process: to the client, reading paused while the channel is full.
    func forward(_ buffer: ByteBuffer, type: SSHChannelData.DataType, from relay: any Channel) {
        guard let context, !life.ended else { return }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(SSHChannelData(type: type, data: .byteBuffer(buffer))), promise: written)
        lastOutputWrite = written.futureResult
        if !ConnectionWritability.isWritable(context.channel) { _ = relay.setOption(ChannelOptions.autoRead, value: false) }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if ConnectionWritability.isWritable(context.channel) {
            for channel in outputChannels { _ = channel.setOption(ChannelOptions.autoRead, value: true) }
        }
        context.fireChannelWritabilityChanged()
    }

    /// Client bytes: to the process, the client's reads paused while its input is full.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = unwrapInboundIn(data)
        guard message.type == .channel, case .byteBuffer(let buffer) = message.data, let inputChannel else { return }
        inputChannel.writeAndFlush(buffer, promise: nil)
        if !inputChannel.isWritable { _ = context.channel.setOption(ChannelOptions.autoRead, value: false) }
    }

    func inputWritable() {
        guard let context else { return }
        // An SSH channel does not read again by itself when autoRead comes back on.
        let channel = context.channel
        channel.setOption(ChannelOptions.autoRead, value: true).whenSuccess { channel.read() }
    }

    /// The client's EOF: the pipe's end closes; a terminal gets its end-of-file character.
    private func clientFinishedInput() {
        guard let inputChannel, process != nil else { return }
        if terminal != nil {
            // ^D (the terminal's own character while it is open).
            let eof = terminalDescriptor.map { agent_pty_eof_char($0) } ?? 4
            var buffer = inputChannel.allocator.buffer(capacity: 1)
            buffer.writeInteger(UInt8(truncatingIfNeeded: eof))
            inputChannel.writeAndFlush(buffer, promise: nil)
        } else {
            // After every byte queued before the EOF has been written (a half-close would
            // drop writes still pending).
            inputChannel.writeAndFlush(inputChannel.allocator.buffer(capacity: 0)).whenComplete { _ in
                inputChannel.close(mode: .output, promise: nil)
            }
        }
    }

    func outputEnded() {
        // A terminal has one relay: its end closed the descriptor, or is about to.
        terminalDescriptor = nil
        let actions = life.outputEnded()
        if let context { perform(actions, context: context) }
    }

    // MARK: The end

    private func processExited(_ status: Int32) {
        let actions = life.processExited(status: status)
        endSession()
        if let context { perform(actions, context: context) }
    }

    /// Does what ``SSHSessionLife`` decided.
    private func perform(_ actions: [SSHSessionLife.Action], context: ChannelHandlerContext) {
        for action in actions {
            switch action {
            case .scheduleDrain:
                let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: Self.terminalDrain) { bound.value.finishAfterDrain() }
            case .drainTerminal:
                drainTerminal()
            case .finish(let status):
                finish(status: status, context: context)
            case .hangUp:
                process?.signalGroup(SIGHUP)
            }
        }
    }

    /// CONNECT for the control plane's connection log when the session starts (JetBrains
    /// sessions are not reported, as in the reference; an unknown type is `TYPE_UNSPECIFIED`).
    private func reportConnect(type: String, context: ChannelHandlerContext) {
        let kind: ConnectionReport.Kind
        switch type {
        case "ssh": kind = .ssh
        case "vscode": kind = .vscode
        case "jetbrains": return
        default: kind = .unspecified
        }
        let ip = context.channel.parent?.remoteAddress?.ipAddress ?? ""
        let report = ConnectionReport(id: ConnectionReport.newID(), action: .connect, kind: kind, ip: ip)
        upward.send(report)
        connectReport = report
    }

    /// DISCONNECT with the status the client got (1 when it went first) and why.
    private func reportDisconnect() {
        guard var report = connectReport else { return }
        connectReport = nil
        report.action = .disconnect
        report.timestamp = Date()
        if transferBlocked {
            report.statusCode = SSHPolicy.fileTransferStatus
            report.reason = "file transfer blocked"
        } else if let status = life.exitStatus {
            if Self.signalled(status) {
                report.statusCode = 255
                report.reason = "process exited with signal: \(Self.signalName(status & 0x7f))"
            } else {
                let code = (status >> 8) & 0xff
                report.statusCode = code
                report.reason = code == 0 ? "graceful" : "process exited with error status: \(code)"
            }
        } else {
            report.statusCode = 1
            report.reason = "the client closed the session"
        }
        upward.send(report)
    }

    /// The session no longer counts (its process ended, or the client went).
    private func endSession() {
        reportDisconnect()
        if let id = sessionID {
            sessions.close(id)
            sessionID = nil
        }
        if let name = counted {
            counts.ended(named: name)
            counted = nil
        }
    }

    private func finishAfterDrain() {
        guard let context else { return }
        perform(life.drainDue(), context: context)
    }

    /// Sends what the terminal holds now (at most ``maxFinalDrain`` bytes): a loop that was
    /// late may not have polled the terminal since the process's last output. On the loop,
    /// with the relay open (its end would have finished the session), as
    /// ``SessionProcess/readHeldOutput(maxBytes:_:)`` asks.
    private func drainTerminal() {
        guard let process, terminalDescriptor != nil, let relay = outputChannels.first else { return }
        process.readHeldOutput(maxBytes: Self.maxFinalDrain) { bytes in
            forward(relay.allocator.buffer(bytes: bytes), type: .channel, from: relay)
        }
    }

    /// Sends the exit status (or signal) and closes the channel, once the output written so
    /// far has left (a client reading slowly gets all of it; one that goes ends the wait).
    private func finish(status: Int32, context: ChannelHandlerContext) {
        guard let pending = lastOutputWrite else {
            sendExit(status: status, context: context)
            return
        }
        lastOutputWrite = nil
        pending.assumeIsolated().whenComplete { _ in
            guard let context = self.context else { return }
            self.sendExit(status: status, context: context)
        }
    }

    private func sendExit(status: Int32, context: ChannelHandlerContext) {
        if Self.signalled(status) {
            let number = status & 0x7f
            context.triggerUserOutboundEvent(
                SSHChannelRequestEvent.ExitSignal(
                    signalName: Self.signalName(number), errorMessage: "", language: "", dumpedCore: status & 0x80 != 0),
                promise: nil)
        } else {
            context.triggerUserOutboundEvent(SSHChannelRequestEvent.ExitStatus(exitStatus: Int((status >> 8) & 0xff)), promise: nil)
        }
        for channel in outputChannels { channel.close(promise: nil) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The client went before the process ended: a closing terminal's SIGHUP.
        perform(life.channelClosed(), context: context)
        endSession()
        forwarding?.close()
        for channel in outputChannels { channel.close(promise: nil) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("ssh session error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
