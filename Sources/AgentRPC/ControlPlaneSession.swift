import AgentCore
import AgentProto
import DRPC
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import Yamux

/// The agent's session with its control plane: connect, fetch the manifest, report
/// startup and lifecycle, and drain the upward outboxes; reconnect with backoff.
///
/// Other modules reach it through AgentCore's seams only: they send upward through
/// ``UpwardSink`` (app status, boundary logs, log lines) and read the manifest through
/// ``ManifestSource``. No send blocks; each kind has a bounded, ordered outbox that survives
/// reconnects, and overflow is counted (``droppedCounts``). Without a control plane
/// (standalone), the outboxes are drained to the log instead.
///
/// Work that needs the live connection rather than a queue (the tailnet's coordination)
/// runs as ``UpwardParticipant``s: each connected session starts every registered
/// participant once the manifest is fetched and start-up reported, and stops it (task
/// cancelled, its streams reset) when the session drops or its shutdown is done.
public final class ControlPlaneSession: Service, UpwardSink, ManifestSource, LifecycleReporter, Sendable {
    public typealias LifecycleState = Coder_Agent_V2_Lifecycle.State

    public struct Configuration: Sendable {
        /// The agent's version, sent with a leading `v` in UpdateStartup.
        public var agentVersion: String
        /// A session that stayed up this long resets the backoff.
        public var healthyAfter: Duration = .seconds(60)
        /// How long shutdown waits for the final lifecycle states and queued items, at most;
        /// in the agent, ``ControlPlaneSession/limitShutdown(until:)`` cuts it at the shutdown
        /// bound less 0.5 s. Long enough that the bound decides: after stop scripts the bound
        /// leaves up to ~13 s, and a loaded host was seen to need more than 5 s for the final
        /// reports (a 5 s default then dropped SHUTDOWN_TIMEOUT well inside the bound).
        public var shutdownDeadline: Duration = .seconds(15)
        /// Outbox bounds.
        public var appStatusCapacity = 256
        public var boundaryLogsCapacity = 1024
        /// Connection reports waiting (the reference's 2048; beyond it they are dropped).
        public var connectionsCapacity = 2048
        public var logsCapacity = 1000
        /// Logs per BatchCreateLogs call, and bytes of output per call (the reference's 1 MiB:
        /// far below the 4 MiB message limit).
        public var logsPerBatch = 100
        public var logBatchBytes = 1 << 20
        /// One log line's output is cut to this many bytes.
        public var maxLogLineBytes = 64 << 10
        /// Keepalive: a yamux ping this often; no answer within `pingTimeout` drops the
        /// connection (the reference's 30 s / 10 s).
        public var pingInterval: Duration = .seconds(30)
        public var pingTimeout: Duration = .seconds(10)
        /// A lifecycle state the control plane answered with an error is sent again on the
        /// same connection after this wait, doubling up to `lifecycleRetryMax`.
        public var lifecycleRetry: Duration = .seconds(1)
        public var lifecycleRetryMax: Duration = .seconds(10)
        /// A module (the manifest's scripts) reports STARTING, the start outcome (READY,
        /// START_TIMEOUT, START_ERROR) and the stop outcome; otherwise the session reports
        /// STARTING and READY with the first manifest, and OFF at shutdown.
        public var startOutcomeFromModule = false
        /// Runs on every manifest after its secret files are written, before it is published.
        public var prepareManifest: ManifestPreparation?
        /// The control plane's access URL, which commands get as `CODER_AGENT_URL`.
        public var controlPlaneURL = ""
        /// What UpdateStartup says the agent runs under (`CODER_AGENT_SUBSYSTEM`, in order).
        public var subsystems: [Coder_Agent_V2_Startup.Subsystem] = []
        /// Where `~/` secret files go; nil: `$HOME`, else the password database's.
        public var homeDirectory: String?

        public init(agentVersion: String) {
            self.agentVersion = agentVersion.hasPrefix("v") ? agentVersion : "v" + agentVersion
        }
    }

    public let configuration: Configuration
    private let dialer: (any ControlPlaneDialer)?
    private let logger: Logger
    private let onManifest: @Sendable (Coder_Agent_V2_Manifest) async -> Void
    /// Started on each connected session (the host fills it from the modules).
    public let participants: UpwardParticipants

    private let manifestStore = ManifestStore()
    private let work = WorkSignal()
    private let shutdownBegun = WorkSignal()
    public let lifecycle: Outbox<Coder_Agent_V2_Lifecycle>
    public let appStatus: Outbox<Coder_Agent_V2_UpdateAppStatusRequest>
    public let boundaryLogs: Outbox<Coder_Agent_V2_ReportBoundaryLogsRequest>
    public let logs: Outbox<Coder_Agent_V2_Log>
    public let connections: Outbox<Coder_Agent_V2_ReportConnectionRequest>

    private struct State {
        var lastState: LifecycleState = .unspecified
        var manifestSeen = false
        var shuttingDown = false
        var logsDisabled = false
        var connections = 0
        /// A connection is up and has fetched its manifest.
        var connected = false
        /// Set when shutdown begins: no connection outlives it.
        var shutdownDeadline: ContinuousClock.Instant?
        /// The agent's overall shutdown bound, applied once shutdown begins.
        var shutdownLimit: ContinuousClock.Instant?
    }
    private let state = Mutex(State())

    /// - Parameters:
    ///   - dialer: nil for standalone mode.
    ///   - participants: work started on each connected session (``UpwardParticipant``).
    ///   - onManifest: called with every manifest (each connection fetches one).
    public init(
        configuration: Configuration, dialer: (any ControlPlaneDialer)?, logger: Logger,
        participants: UpwardParticipants = UpwardParticipants(),
        onManifest: @escaping @Sendable (Coder_Agent_V2_Manifest) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.dialer = dialer
        self.logger = logger
        self.participants = participants
        self.onManifest = onManifest
        lifecycle = Outbox(name: "lifecycle", capacity: 32, signal: work)
        appStatus = Outbox(name: "app_status", capacity: configuration.appStatusCapacity, signal: work)
        boundaryLogs = Outbox(name: "boundary_logs", capacity: configuration.boundaryLogsCapacity, signal: work)
        logs = Outbox(name: "logs", capacity: configuration.logsCapacity, signal: work)
        connections = Outbox(name: "connections", capacity: configuration.connectionsCapacity, signal: work)
        // CREATED counts as reported and is never sent (coderd's state for an agent that
        // started again would otherwise go back to `created` until STARTING arrives).
        state.withLock { $0.lastState = .created }
    }

    // MARK: Upward API (never blocks)

    /// Queues a lifecycle state; states only move forward, and each is delivered once.
    /// Returns false (and queues nothing) for a state not later than the last.
    @discardableResult
    public func setLifecycle(_ next: LifecycleState) -> Bool {
        let accepted = state.withLock { s -> Bool in
            guard next.rawValue > s.lastState.rawValue else { return false }
            s.lastState = next
            return true
        }
        guard accepted else {
            logger.debug("lifecycle state refused: not later than the last", metadata: ["state": "\(next)"])
            return false
        }
        var item = Coder_Agent_V2_Lifecycle()
        item.state = next
        item.changedAt = Google_Protobuf_Timestamp(date: Date())
        lifecycle.append(item)
        return true
    }

    // MARK: LifecycleReporter

    @discardableResult
    public func report(_ state: AgentLifecycleState) -> Bool {
        setLifecycle(LifecycleState(rawValue: state.rawValue) ?? .unspecified)
    }

    public var currentLifecycle: AgentLifecycleState {
        AgentLifecycleState(rawValue: state.withLock { $0.lastState.rawValue }) ?? .created
    }

    @discardableResult
    public func send(_ status: AppStatusReport) -> UpwardReceipt {
        let receipt = UpwardReceipt()
        appStatus.append(Self.request(status), receipt: receipt)
        return receipt
    }

    @discardableResult
    public func send(_ batch: BoundaryLogBatch) -> UpwardReceipt {
        let receipt = UpwardReceipt()
        boundaryLogs.append(Self.request(batch), receipt: receipt)
        return receipt
    }

    /// Ships one of the agent's own log lines with BatchCreateLogs (cut to
    /// ``Configuration/maxLogLineBytes``); nothing once the control plane said the agent's
    /// log limit is exceeded.
    public func send(_ line: AgentLogLine) {
        guard !state.withLock({ $0.logsDisabled }) else { return }
        var entry = Coder_Agent_V2_Log()
        entry.createdAt = Google_Protobuf_Timestamp(date: line.createdAt)
        entry.output = Self.truncated(line.message, toBytes: configuration.maxLogLineBytes)
        entry.level = Coder_Agent_V2_Log.Level(rawValue: line.level.rawValue) ?? .warn
        logs.append(entry)
    }

    /// Queues a connection's start or end for ReportConnection; one that finds the outbox
    /// full is dropped with a warning, as the reference drops it.
    public func send(_ report: ConnectionReport) {
        if !connections.append(Self.request(report)) {
            logger.warning("connection report dropped: too many waiting", metadata: ["max": "\(configuration.connectionsCapacity)"])
        }
    }

    public var isConnected: Bool { state.withLock { $0.connected } }

    public var hasControlPlane: Bool { dialer != nil }

    // MARK: Manifest (ManifestSource)

    public var currentManifest: AgentManifest? { manifestStore.currentManifest }

    public var currentPublication: ManifestPublication? { manifestStore.currentPublication }

    public func manifests() -> AsyncStream<AgentManifest> { manifestStore.manifests() }

    /// `text` cut to at most `limit` UTF-8 bytes, on a character boundary, marked as cut.
    static func truncated(_ text: String, toBytes limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        let marker = " …(truncated)"
        var cut = text.utf8.index(text.utf8.startIndex, offsetBy: max(0, limit - marker.utf8.count))
        while cut > text.startIndex, text.utf8[cut] & 0xC0 == 0x80 { cut = text.utf8.index(before: cut) }
        return String(text[..<cut]) + marker
    }

    /// Every outbox, lifecycle first (the order the drain serves them in).
    private var outboxes: [any UpwardQueue] { [lifecycle, appStatus, boundaryLogs, connections, logs] }

    /// Items each outbox refused to send upward because the control plane rejected them.
    public var rejectedCounts: [String: Int] {
        Dictionary(uniqueKeysWithValues: outboxes.map { ($0.name, $0.rejected) })
    }

    /// Items each outbox dropped because it was full.
    public var droppedCounts: [String: Int] {
        Dictionary(uniqueKeysWithValues: outboxes.map { ($0.name, $0.dropped) })
    }

    /// Successful connections so far.
    public var connectionCount: Int { state.withLock { $0.connections } }

    // MARK: Service

    public func run() async throws {
        await withShutdownHandler {
            if dialer == nil {
                await runStandalone()
            } else {
                await runConnected()
            }
        } onShutdown: {
            self.beginShutdown()
        }
        // What could not be delivered before the deadline is gone with the agent.
        for outbox in outboxes { outbox.abandonAll() }
    }

    /// Queues SHUTTING_DOWN and, unless a final state (OFF, SHUTDOWN_TIMEOUT,
    /// SHUTDOWN_ERROR) was already reported by the stop scripts, OFF; the session delivers
    /// them, then ends.
    public func beginShutdown() {
        // The final states are queued before the flag is set: a sender that sees the flag
        // and an empty queue may end the session, so OFF must already be in it.
        setLifecycle(.shuttingDown)
        if !currentLifecycle.isFinal { setLifecycle(.off) }
        let deadline = ContinuousClock.now + configuration.shutdownDeadline
        state.withLock { s in
            s.shuttingDown = true
            s.shutdownDeadline = min(s.shutdownDeadline ?? deadline, s.shutdownLimit ?? deadline, deadline)
        }
        shutdownBegun.notify()
        logger.debug("control plane session shutting down", metadata: ["queued_states": "\(lifecycle.count)"])
        work.notify()
    }

    /// Sets an absolute limit for the final reports (the agent's overall shutdown bound);
    /// the session keeps whichever deadline comes first.
    public func limitShutdown(until deadline: ContinuousClock.Instant) {
        state.withLock { s in
            s.shutdownLimit = min(s.shutdownLimit ?? deadline, deadline)
        }
    }

    private var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }

    private var allDrained: Bool {
        // Logs no longer count once the control plane refuses them (log limit exceeded).
        let logsDisabled = state.withLock { $0.logsDisabled }
        return outboxes.allSatisfy { $0.isEmpty || (logsDisabled && $0 === logs) }
    }

    /// Standalone: what would go upward is written to the log.
    private func runStandalone() async {
        logger.info("no control plane configured: running standalone; upward reports go to this log")
        state.withLock { $0.manifestSeen = true }
        setLifecycle(.starting)
        setLifecycle(.ready)
        while true {
            drainToLog()
            // A cancelled group (another service failed) ends the session at once: the
            // signal's wait returns immediately after cancellation, so without this check
            // the loop would spin and hold the agent up.
            if isShuttingDown || Task.isCancelled { drainToLog(); return }
            await work.wait()
        }
    }

    private func drainToLog() {
        while let (seq, items) = lifecycle.peek() {
            logger.info("lifecycle", metadata: ["state": "\(items[0].state)"])
            lifecycle.acknowledge(through: seq, as: .logged)
        }
        while let (seq, items) = appStatus.peek() {
            logger.info("app status", metadata: ["slug": "\(items[0].slug)", "state": "\(items[0].state)", "message": "\(items[0].message)"])
            appStatus.acknowledge(through: seq, as: .logged)
        }
        while let (seq, items) = boundaryLogs.peek() {
            logger.info("boundary logs", metadata: ["count": "\(items[0].logs.count)", "session_id": "\(items[0].sessionID)"])
            boundaryLogs.acknowledge(through: seq, as: .logged)
        }
        while let (seq, items) = connections.peek() {
            let connection = items[0].connection
            logger.info(
                "connection",
                metadata: [
                    "action": "\(connection.action)", "type": "\(connection.type)", "ip": "\(connection.ip)",
                    "status_code": "\(connection.statusCode)",
                ])
            connections.acknowledge(through: seq, as: .logged)
        }
        while let (seq, _) = logs.peek(configuration.logsPerBatch) {
            logs.acknowledge(through: seq, as: .logged)
        }
    }

    /// Reconnect delays: the reference's schedule (100 ms × 1.618 per attempt, cap 10 s,
    /// first attempt immediate), each drawn from the upper half of its step, so agents do not
    /// all retry on the same schedule after a control-plane restart and no wait passes the
    /// cap; reset after a session that stayed healthy.
    public static let reconnectBackoff = Backoff(initial: .milliseconds(100) * 1.618, maximum: .seconds(10), factor: 1.618, jitter: .upperHalf)

    private func runConnected() async {
        var backoff = Self.reconnectBackoff
        while true {
            if Task.isCancelled { return }
            if let deadline = state.withLock({ $0.shutdownDeadline }) {
                if allDrained || ContinuousClock.now >= deadline { return }
            }
            let wait = backoff.next()
            if wait > .zero {
                if let deadline = state.withLock({ $0.shutdownDeadline }) {
                    // Shutting down: the wait ends by the deadline at the latest.
                    try? await Task.sleep(for: min(wait, max(.zero, deadline - ContinuousClock.now)))
                } else {
                    // Only shutdown cuts the wait short: items queued meanwhile go with the
                    // next connection, never a dial of their own.
                    await sleep(for: wait, orUntil: { [shutdownBegun] in await shutdownBegun.wait() })
                }
                if isShuttingDown && allDrained { return }
            }
            let started = ContinuousClock.now
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await self.connectOnce() }
                    group.addTask { try await self.enforceShutdownDeadline() }
                    try await group.next()
                    group.cancelAll()
                }
                if isShuttingDown { return }
            } catch {
                // During shutdown a lost connection is dialled again while the deadline
                // allows and something is still to be acknowledged (the final states above
                // all): the loop's head ends it. A state leaves its outbox only once
                // acknowledged, so none is lost; one whose answer the drop swallowed may
                // arrive twice, as the reference's may.
                if isShuttingDown {
                    logger.debug("control plane connection ended during shutdown", metadata: ["error": "\(error)"])
                    if allDrained { return }
                    continue
                }
                logger.warning("control plane connection failed", metadata: ["error": "\(error)"])
            }
            if ContinuousClock.now - started >= configuration.healthyAfter { backoff.reset() }
        }
    }

    /// Returns never; throws once shutdown has begun and its deadline passed, which ends
    /// the connection even when the control plane stalls a call.
    private func enforceShutdownDeadline() async throws {
        while true {
            if let deadline = state.withLock({ $0.shutdownDeadline }) {
                try await Task.sleep(until: deadline, clock: .continuous)
                throw ShutdownDeadlineExceeded()
            }
            await shutdownBegun.wait()
            try Task.checkCancellation()
        }
    }

    struct ShutdownDeadlineExceeded: Error, CustomStringConvertible {
        var description: String { "shutdown deadline exceeded before the final reports were acknowledged" }
    }

    struct ConnectionLost: Error, CustomStringConvertible {
        let reason: YamuxSessionError
        var description: String { "disconnected from the control plane (\(reason))" }
    }

    private func connectOnce() async throws {
        guard let dialer else { return }
        let connection = try await dialer.connect()
        let session = connection.session
        let (interval, timeout) = (configuration.pingInterval, configuration.pingTimeout)
        try await withTaskCancellationHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { throw ConnectionLost(reason: await session.waitClosed()) }
                group.addTask { try await self.serve(connection) }
                // Keepalive pings from the dial on, so a path that died before the manifest's
                // answer (no deadline of its own, as the reference's) is noticed as well.
                group.addTask {
                    while true {
                        try await Task.sleep(for: interval)
                        try await session.ping(timeout: timeout)
                    }
                }
                do {
                    try await group.next()
                } catch {
                    group.cancelAll()
                    await session.close()
                    throw error
                }
                // The work ended (shutdown drained it): the pings stop with it.
                group.cancelAll()
                await session.close()
            }
        } onCancel: {
            session.closeSoon()
        }
    }

    /// One connection's work: manifest, startup, the secrets' files, the manifest published
    /// (the first starts the scripts), then the outboxes until shutdown has drained (the
    /// connection's keepalive pings run beside it, ``connectOnce()``).
    private func serve(_ connection: ControlPlaneConnection) async throws {
        let session = connection.session
        let api = AgentAPIClient(session: session)
        let manifest = try await api.getManifest()
        var agentManifest = Self.agentManifest(from: manifest, sessionToken: connection.token, logger: logger)
        agentManifest.controlPlaneURL = configuration.controlPlaneURL
        _ = try await api.updateStartup(
            version: configuration.agentVersion, expandedDirectory: agentManifest.directory, subsystems: configuration.subsystems)
        // On every fetch, before the manifest is published: start scripts find the files.
        if !manifest.secrets.isEmpty { await writeSecretFiles(manifest.secrets) }
        if let prepare = configuration.prepareManifest {
            await prepare(agentManifest, !state.withLock { $0.manifestSeen })
        }
        manifestStore.publish(agentManifest)
        await onManifest(manifest)
        let (first, number) = state.withLock { s -> (Bool, Int) in
            s.connections += 1
            s.connected = true
            defer { s.manifestSeen = true }
            return (!s.manifestSeen, s.connections)
        }
        defer { state.withLock { $0.connected = false } }
        if first && !configuration.startOutcomeFromModule {
            setLifecycle(.starting)
            setLifecycle(.ready)
        }
        // The participants run beside the drain and stop with it: when the connection
        // drops (this task is cancelled) or shutdown has sent everything.
        try await withThrowingDiscardingTaskGroup { participantTasks in
            for participant in participants.all {
                participantTasks.addTask {
                    await self.runParticipant(participant, session: number, on: session, version: connection.version)
                }
            }
            try await self.drain(api)
            participantTasks.cancelAll()
        }
    }

    /// Runs one participant on session number `number` until it returns or its task is
    /// cancelled; then ends the streams it left open (reset when it was stopped, closed
    /// when it returned or threw on its own).
    private func runParticipant(
        _ participant: any UpwardParticipant, session number: Int, on yamux: YamuxSession, version: AgentAPIVersion
    ) async {
        let view = ParticipantSession(number: number, yamux: yamux, apiVersion: version)
        logger.debug("upward participant started", metadata: ["participant": "\(participant.name)", "session": "\(number)"])
        do {
            try await participant.run(on: view)
        } catch {
            if !Task.isCancelled {
                logger.warning(
                    "upward participant failed; it starts again with the next session",
                    metadata: ["participant": "\(participant.name)", "error": "\(error)"])
            }
        }
        await view.end(abort: Task.isCancelled)
        logger.debug("upward participant stopped", metadata: ["participant": "\(participant.name)", "session": "\(number)"])
    }

    /// Sends queued items in order (lifecycle first) until shutdown has drained everything.
    private func drain(_ api: AgentAPIClient) async throws {
        while true {
            try Task.checkCancellation()
            if let (seq, items) = lifecycle.peek() {
                logger.debug("reporting lifecycle", metadata: ["state": "\(items[0].state)"])
                try await deliver(lifecycle, through: seq, retryingRemoteErrors: true) { _ = try await api.updateLifecycle(items[0]) }
                continue
            }
            if let (seq, items) = appStatus.peek() {
                try await deliver(appStatus, through: seq) { try await api.updateAppStatus(items[0]) }
                continue
            }
            if let (seq, items) = boundaryLogs.peek() {
                try await deliver(boundaryLogs, through: seq) { try await api.reportBoundaryLogs(items[0]) }
                continue
            }
            if let (seq, items) = connections.peek() {
                try await deliver(connections, through: seq) { try await api.reportConnection(items[0]) }
                continue
            }
            if !state.withLock({ $0.logsDisabled }),
                let (seq, items) = logs.peek(configuration.logsPerBatch, budget: configuration.logBatchBytes, size: { $0.output.utf8.count })
            {
                var request = Coder_Agent_V2_BatchCreateLogsRequest()
                request.logSourceID = [UInt8](repeating: 0, count: 16).withUnsafeBytes { Data($0) }
                request.logs = items
                try await deliver(logs, through: seq) {
                    let response = try await api.batchCreateLogs(request)
                    if response.logLimitExceeded {
                        state.withLock { $0.logsDisabled = true }
                        logger.warning("control plane log limit exceeded; no more agent logs are sent")
                    }
                }
                continue
            }
            if isShuttingDown {
                // What participants still send (stop scripts' logs and reports) goes before
                // the connection closes; the agent's own lines logged meanwhile go too.
                for participant in participants.all { await participant.drained() }
                if allDrained { return }
                continue
            }
            await work.wait()
        }
    }

    /// Sends one outbox's items and removes them once acknowledged. An error the control
    /// plane answered with (a bad request, a method it does not have) cannot be fixed by
    /// retrying: those items are removed, counted and logged, and the connection stays.
    /// Transport failures propagate, so the items are sent again after the reconnect.
    /// `retryingRemoteErrors` (lifecycle states, which must all arrive: a lost READY leaves
    /// the workspace starting for ever): an error answer is taken for a passing one (a
    /// database timeout) and the item is sent again after ``Configuration/lifecycleRetry``,
    /// doubling, on the same connection; the reference tears the connection down instead
    /// and sends it again after the reconnect.
    private func deliver<Item>(
        _ outbox: Outbox<Item>, through seq: UInt64, retryingRemoteErrors: Bool = false, _ call: () async throws -> Void
    ) async throws {
        var retry = Backoff(initial: configuration.lifecycleRetry, maximum: configuration.lifecycleRetryMax, jitter: .none)
        while true {
            do {
                try await call()
                outbox.acknowledge(through: seq)
                return
            } catch let error as DRPCCallError {
                // The control plane's own text, as a caller waiting on the item should see it.
                guard case .remote(let body) = error else { throw error }
                guard retryingRemoteErrors, !body.isUnsupported else {
                    outbox.reject(through: seq, reason: body.message)
                    logger.warning("control plane rejected \(outbox.name)", metadata: ["error": "\(error)"])
                    return
                }
                let wait = retry.failed()
                logger.warning("control plane refused \(outbox.name); sending it again", metadata: ["error": "\(error)", "in": "\(wait)"])
                try await Task.sleep(for: wait)
            }
        }
    }

    /// What other modules need of a manifest (AgentCore's seam): the expanded directory and
    /// variables, the secrets' variables and `sessionToken` concealed (refusals to `logger`).
    public static func agentManifest(
        from manifest: Coder_Agent_V2_Manifest, environment base: [String: String] = ProcessInfo.processInfo.environment,
        sessionToken: String? = nil, logger: Logger? = nil
    ) -> AgentManifest {
        let predefined: [String: String] = [
            "CODER": "true",
            "CODER_WORKSPACE_NAME": manifest.workspaceName,
            "CODER_WORKSPACE_AGENT_NAME": manifest.agentName,
            "CODER_WORKSPACE_OWNER_NAME": manifest.ownerUsername,
        ]
        var variables = predefined
        // Each value is expanded against the names above, then the agent's own environment
        // (looked up, not merged: a merged copy per variable made a large manifest quadratic).
        // Not against the manifest's other variables: their order is the map's, not the
        // template's, so the result would change from run to run.
        variables.reserveCapacity(variables.count + manifest.environmentVariables.count)
        for (key, value) in manifest.environmentVariables {
            variables[key] = expand(value, environment: base, overrides: predefined)
        }
        let tailnet = AgentManifest.Tailnet(
            agentID: Array(manifest.agentID),
            derpMap: manifest.hasDerpMap ? ((try? manifest.derpMap.serializedBytes()) ?? []) : [],
            derpForceWebSockets: manifest.derpForceWebsockets,
            disableDirectConnections: manifest.disableDirectConnections)
        var result = AgentManifest(
            directory: expand(manifest.directory, environment: base), environment: variables,
            workspaceName: manifest.workspaceName, agentName: manifest.agentName, ownerName: manifest.ownerUsername,
            tailnet: tailnet)
        result.workspaceID = Array(manifest.workspaceID)
        result.motdFile = expand(manifest.motdPath, environment: base)
        result.vsCodePortProxyURI = manifest.vsCodePortProxyUri
        result.gitAuthConfigs = Int(manifest.gitAuthConfigs)
        let secrets = ManifestSecrets.variables(manifest.secrets)
        for (name, reason) in secrets.refused {
            logger?.warning("secret variable not set", metadata: ["env_name": "\(name)", "reason": "\(reason)"])
        }
        result.commandSecrets = CommandSecrets(sessionToken: sessionToken, variables: secrets.variables)
        // A script's log source is a UUID (16 bytes), as Go's uuid.FromBytes requires; one
        // that is not cannot be logged for, and is left out rather than trap the log writer.
        let (scripts, malformed) = (
            manifest.scripts.filter { $0.logSourceID.count == 16 }, manifest.scripts.filter { $0.logSourceID.count != 16 }
        )
        for script in malformed {
            logger?.warning(
                "script left out: its log source id is not 16 bytes",
                metadata: ["display_name": "\(script.displayName)", "bytes": "\(script.logSourceID.count)"])
        }
        result.scripts = scripts.map { script in
            ManifestScript(
                id: Array(script.id), logSourceID: Array(script.logSourceID), logPath: script.logPath, script: script.script,
                cron: script.cron, runOnStart: script.runOnStart, runOnStop: script.runOnStop,
                startBlocksLogin: script.startBlocksLogin, timeout: duration(script.timeout),
                displayName: script.displayName)
        }
        result.metadata = manifest.metadata.map { description in
            ManifestMetadata(
                key: description.key, displayName: description.displayName, script: description.script,
                interval: ManifestMetadata.seconds(fromWire: description.interval.seconds, nanos: description.interval.nanos),
                timeout: ManifestMetadata.seconds(fromWire: description.timeout.seconds, nanos: description.timeout.nanos))
        }
        result.apps = manifest.apps.map { app in
            ManifestApp(
                id: Array(app.id), slug: app.slug, healthcheckURL: app.healthcheck.url,
                healthcheckInterval: wholeSeconds(app.healthcheck.interval), healthcheckThreshold: app.healthcheck.threshold,
                health: ManifestApp.Health(rawValue: app.health.rawValue) ?? .unspecified)
        }
        return result
    }

    /// Blocking file work off the cooperative threads: one thread, a few manifests queued.
    private static let secretFilePool = BlockingPool(name: "secret-files", threads: 1, maxQueued: 4)

    /// Writes the secrets' files (``ManifestSecrets/writeFiles(_:home:logger:)``) in
    /// ``Configuration/homeDirectory``.
    private func writeSecretFiles(_ secrets: [Coder_Agent_V2_WorkspaceSecret]) async {
        let logger = self.logger
        let home = configuration.homeDirectory ?? ManifestSecrets.homeDirectory()
        do {
            _ = try await Self.secretFilePool.run { _ in ManifestSecrets.writeFiles(secrets, home: home, logger: logger) }
        } catch {
            logger.warning("secret files not written", metadata: ["error": "\(error)"])
        }
    }

    /// A protobuf Duration as a Swift one; negative parts count as zero and more than
    /// ``ManifestMetadata/maxSeconds`` counts as that (a deadline that far off must not
    /// overflow the clock's arithmetic).
    static func duration(_ value: Google_Protobuf_Duration) -> Duration {
        .seconds(min(max(0, value.seconds), ManifestMetadata.maxSeconds)) + .nanoseconds(Int64(max(0, value.nanos)))
    }

    /// A protobuf Duration in whole seconds, as the reference reads a health check's interval
    /// (`int32(Interval.AsDuration().Seconds())`): below a second is zero, which disables the
    /// check (a 1 ns interval had been a loop of probes with no pause).
    static func wholeSeconds(_ value: Google_Protobuf_Duration) -> Duration {
        .seconds(min(max(0, value.seconds), ManifestMetadata.maxSeconds))
    }

    /// Expands a leading `~` and `$VAR` / `${VAR}` as the reference does for the manifest
    /// directory (``PathExpansion``); a name in `overrides` wins over `environment`.
    public static func expand(_ path: String, environment: [String: String], overrides: [String: String] = [:]) -> String {
        PathExpansion.expand(path, environment: environment, overrides: overrides)
    }
}
