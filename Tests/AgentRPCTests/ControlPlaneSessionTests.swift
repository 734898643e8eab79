import AgentCore
import AgentProto
import AgentRPC
import AgentTestSupport
import ControlPlaneDouble
import Foundation
import Logging
import SwiftProtobuf
import Synchronization
import Testing

/// The agent's control-plane session against the in-process double, over real loopback.
@Suite(.timeLimit(.minutes(2)))
struct ControlPlaneSessionTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// `shutdownDeadline` is generous where a test checks that the last states arrive: under a loaded
    /// CI host two answers can take longer than a tight deadline (it is what the deadline is for).
    func makeSession(
        _ url: String, token: String, version: String = "2.10",
        shutdownDeadline: Duration = .seconds(3),
        onManifest: @escaping @Sendable (Coder_Agent_V2_Manifest) async -> Void = { _ in }
    ) -> ControlPlaneSession {
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = shutdownDeadline
        return ControlPlaneSession(
            configuration: configuration,
            dialer: WebSocketDialer(baseURL: url, token: token, version: version, logger: Self.quiet),
            logger: Self.quiet, onManifest: onManifest)
    }

    @Test func connectsFetchesManifestAndReportsLifecycle() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let manifests = Mutex<[Coder_Agent_V2_Manifest]>([])
            let session = makeSession(url, token: double.token, shutdownDeadline: .seconds(30)) { m in manifests.withLock { $0.append(m) } }
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 })
            let recorded = double.recorded.withLock { $0 }
            #expect(recorded.lifecycle == [.starting, .ready])
            #expect(recorded.startups.first?.version == "v0.1.0")
            let home = ProcessInfo.processInfo.environment["HOME"] ?? ""
            #expect(recorded.startups.first?.expandedDirectory == home + "/project")
            #expect(recorded.queries.first?.contains("version=2.10") == true)
            #expect(recorded.queries.first?.contains("role=agent") == true)
            #expect(manifests.withLock { $0.first?.environmentVariables["FROM_MANIFEST"] } == "yes")

            session.beginShutdown()
            try await running.value
            #expect(double.recorded.withLock { $0.lifecycle } == [.starting, .ready, .shuttingDown, .off])
        }
    }

    /// A dropped connection: reconnect, manifest and startup again, no repeated states.
    @Test func reconnectsAfterADropWithoutRepeatingStates() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = makeSession(url, token: double.token, shutdownDeadline: .seconds(30))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 })
            await double.dropConnections()
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.manifests } >= 2 })
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.startups.count } >= 2 })
            session.send(AppStatusReport(slug: "after", state: .working))
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.appStatuses.count } == 1 })
            session.beginShutdown()
            try await running.value
            #expect(double.recorded.withLock { $0.lifecycle } == [.starting, .ready, .shuttingDown, .off])
            #expect(session.connectionCount >= 2)
        }
    }

    @Test func wrongTokenAndWrongVersionBackOffWithoutConnecting() async throws {
        for (wrongToken, version, status) in [(true, "2.10", 401), (false, "3.0", 400)] {
            // A double of its own per case: the session before dials until its shutdown
            // deadline, and a dial in flight then would reach a shared double late.
            let double = ControlPlaneDouble()
            try await double.run { url in
                let token = wrongToken ? "00000000-0000-4000-8000-000000000000" : double.token
                let session = makeSession(url, token: token, version: version)
                let running = Task { try await session.run() }
                #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.upgradeAttempts } >= 3 })
                try await Task.sleep(for: .milliseconds(300))
                let attempts = double.recorded.withLock { $0.upgradeAttempts }
                // Backoff: 0, ~81–162, ~131–262, ~212–424 ms ... so a second holds only a handful.
                #expect(attempts < 10)
                #expect(session.connectionCount == 0)
                #expect(double.recorded.withLock { $0.refusals.allSatisfy { $0 == status } })
                session.beginShutdown()
                try await running.value
                #expect(double.recorded.withLock { $0.connections } == 0)
            }
        }
    }

    /// The control plane dies (listener and connections gone) and comes back on the same
    /// address: the agent retries through the refused connects, then reconnects; the
    /// manifest and startup repeat, lifecycle states do not, and what was queued while the
    /// control plane was down arrives.
    @Test func survivesTheControlPlaneBeingKilledAndRestarted() async throws {
        let first = ControlPlaneDouble()
        let port = Mutex(0)
        let session = Mutex<ControlPlaneSession?>(nil)
        let running = Mutex<Task<Void, any Error>?>(nil)
        // Not a kernel-chosen port: the second control plane binds it again after an outage,
        // during which the kernel could hand a chosen one to another socket.
        try await first.run(port: freeLoopbackPort()) { url in
            port.withLock { $0 = Int(url.split(separator: ":").last!)! }
            let s = makeSession(url, token: first.token, shutdownDeadline: .seconds(30))
            session.withLock { $0 = s }
            running.withLock { $0 = Task { try await s.run() } }
            #expect(await eventually(timeout: .seconds(30)) { first.recorded.withLock { $0.lifecycle.count } == 2 })
        }
        let agent = try #require(session.withLock { $0 })
        // Down: queued work waits in the outbox.
        #expect(await eventually(timeout: .seconds(30)) { !agent.isConnected })
        let receipt = agent.send(AppStatusReport(slug: "queued-while-down", state: .working))
        try await Task.sleep(for: .milliseconds(400))
        let second = ControlPlaneDouble()
        try await second.run(port: port.withLock { $0 }) { _ in
            #expect(await eventually(timeout: .seconds(30)) { second.recorded.withLock { $0.appStatuses.count } == 1 })
            #expect(await receipt.wait() == .delivered)
            let recorded = second.recorded.withLock { $0 }
            #expect(recorded.manifests == 1)
            #expect(recorded.startups.count == 1)
            #expect(recorded.lifecycle.isEmpty)
            agent.beginShutdown()
            try await running.withLock { $0 }!.value
            #expect(second.recorded.withLock { $0.lifecycle } == [.shuttingDown, .off])
        }
        #expect(agent.connectionCount == 2)
    }

    @Test func outboxesDeliverInOrder() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = makeSession(url, token: double.token)
            for i in 0..<5 {
                session.send(AppStatusReport(slug: "app", state: .idle, message: "step \(i)"))
            }
            session.send(
                BoundaryLogBatch(
                    entries: [
                        .init(allowed: true, time: .init(seconds: 1, nanos: 123_456_789), httpRequest: .init(method: "GET", url: "https://x/", matchedRule: "x"), sequenceNumber: 7),
                        .init(allowed: false, time: .init(seconds: 1_767_225_600, nanos: 1), httpRequest: nil, sequenceNumber: 8),
                    ],
                    sessionID: "s1", confinedProcessName: "claude"))
            session.send(AgentLogLine(level: .warn, message: "disk almost full"))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.appStatuses.count == 5 && $0.boundaryLogs.count == 1 && $0.logs.count == 1 } })
            let recorded = double.recorded.withLock { $0 }
            #expect(recorded.appStatuses.map(\.message) == (0..<5).map { "step \($0)" })
            #expect(recorded.appStatuses.allSatisfy { $0.state == .idle && $0.slug == "app" })
            let boundary = try #require(recorded.boundaryLogs.first)
            #expect(boundary.sessionID == "s1" && boundary.confinedProcessName == "claude")
            #expect(boundary.logs.first?.httpRequest.url == "https://x/")
            #expect(boundary.logs.first?.sequenceNumber == 7)
            // The timestamps arrive exactly as given: no rounding through a floating-point date.
            #expect(boundary.logs.map(\.time.seconds) == [1, 1_767_225_600])
            #expect(boundary.logs.map(\.time.nanos) == [123_456_789, 1])
            #expect(recorded.logs.first?.output == "disk almost full")
            #expect(recorded.logs.first?.level == .warn)
            session.beginShutdown()
            try await running.value
        }
    }

    /// An item the control plane refuses is dropped and counted, not retried forever, and
    /// what is queued behind it still arrives on the same connection.
    @Test func rejectedItemsAreCountedNotRetried() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = makeSession(url, token: double.token)
            let receipts = ["first", String(repeating: "x", count: 161), "third"].map { message in
                session.send(AppStatusReport(slug: "app", state: .working, message: message))
            }
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.appStatuses.count } == 2 })
            #expect(double.recorded.withLock { $0.appStatuses.map(\.message) } == ["first", "third"])
            #expect(session.rejectedCounts["app_status"] == 1)
            #expect(await receipts[0].wait() == .delivered)
            guard case .rejected(let reason) = await receipts[1].wait() else {
                Issue.record("the long message was not rejected")
                return
            }
            #expect(reason.contains("160"), "the control plane's reason reaches the sender: \(reason)")
            #expect(await eventually(timeout: .seconds(30)) { session.appStatus.isEmpty })
            #expect(double.recorded.withLock { $0.connections } == 1)
            session.beginShutdown()
            try await running.value
        }
    }

    /// A lifecycle state the control plane answers with an error (its database down for a
    /// moment) is sent again on the same connection, not dropped: READY still arrives.
    @Test func aRefusedLifecycleStateIsSentAgain() async throws {
        let double = ControlPlaneDouble()
        double.failingLifecycleCalls.withLock { $0 = 3 }
        try await double.run { url in
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.lifecycleRetry = .milliseconds(20)
            let session = ControlPlaneSession(
                configuration: configuration, dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: Self.quiet),
                logger: Self.quiet)
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle } == [.starting, .ready] })
            #expect(double.failingLifecycleCalls.withLock { $0 } == 0, "the refusals were answered")
            #expect(session.rejectedCounts["lifecycle"] == 0)
            #expect(double.recorded.withLock { $0.connections } == 1, "on the same connection")
            session.beginShutdown()
            try await running.value
        }
    }

    /// Huge log lines are cut, and batches stay far below the 4 MiB message limit.
    @Test func largeLogLinesAreCutAndBatchedByBytes() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = makeSession(url, token: double.token)
            for i in 0..<30 { session.send(AgentLogLine(level: .warn, message: "\(i) " + String(repeating: "é", count: 100_000))) }
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(90)) { double.recorded.withLock { $0.logs.count } == 30 })
            let logs = double.recorded.withLock { $0.logs }
            #expect(logs.allSatisfy { $0.output.utf8.count <= 64 << 10 && $0.output.hasSuffix("(truncated)") })
            let firstWords: [String?] = logs.map { log in log.output.split(separator: " ").first.map { String($0) } }
            let expected: [String?] = (0..<30).map { String($0) }
            #expect(firstWords == expected)
            #expect(double.recorded.withLock { $0.connections } == 1)
            #expect(session.rejectedCounts["logs"] == 0)
            session.beginShutdown()
            try await running.value
        }
    }

    @Test func logLimitStopsAgentLogs() async throws {
        let double = ControlPlaneDouble()
        double.logLimitExceeded.withLock { $0 = true }
        try await double.run { url in
            let session = makeSession(url, token: double.token)
            session.send(AgentLogLine(level: .error, message: "first"))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.logs.count } == 1 })
            session.send(AgentLogLine(level: .error, message: "second"))
            try await Task.sleep(for: .milliseconds(300))
            #expect(double.recorded.withLock { $0.logs.count } == 1)
            session.beginShutdown()
            try await running.value
        }
    }

    @Test func slowAnswersStillDeliverInOrder() async throws {
        let double = ControlPlaneDouble()
        double.answerDelay.withLock { $0 = .milliseconds(100) }
        try await double.run { url in
            let session = makeSession(url, token: double.token, shutdownDeadline: .seconds(30))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 })
            session.beginShutdown()
            try await running.value
            #expect(double.recorded.withLock { $0.lifecycle } == [.starting, .ready, .shuttingDown, .off])
        }
    }

    /// A control plane that stops answering cannot hold shutdown past its deadline.
    @Test func stalledControlPlaneCannotBlockShutdown() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.shutdownDeadline = .milliseconds(500)
            let session = ControlPlaneSession(
                configuration: configuration,
                dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: Self.quiet),
                logger: Self.quiet)
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 })
            // And READY's acknowledgement is back (the double records a state before its
            // answer reaches the agent), so that only the states below stay queued.
            #expect(await eventually(timeout: .seconds(30)) { session.lifecycle.count == 0 })
            double.answerDelay.withLock { $0 = .seconds(3600) }
            session.beginShutdown()
            // Returns at the 500 ms deadline; held by the hour's delay, the suite's time limit
            // fails it (no wall-clock bound here: a busy host stretches the half second).
            try await running.value
            // SHUTTING_DOWN was sent but never acknowledged, so it is still queued, once.
            #expect(session.lifecycle.count == 2)
            double.answerDelay.withLock { $0 = .zero }
        }
    }

    /// A connection lost during shutdown, before the final states were acknowledged, is
    /// dialled again within the deadline: SHUTTING_DOWN and OFF still arrive.
    @Test func aConnectionLostDuringShutdownIsDialledAgainForTheFinalStates() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            let session = makeSession(url, token: double.token, shutdownDeadline: .seconds(60))
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle } == [.starting, .ready] })
            #expect(await eventually(timeout: .seconds(30)) { session.lifecycle.count == 0 })
            // The control plane stops answering, shutdown begins, then the connection drops.
            double.answerDelay.withLock { $0 = .seconds(3600) }
            session.beginShutdown()
            #expect(await eventually(timeout: .seconds(30)) { double.lifecycleCallsArrived.withLock { $0 } == 3 }, "SHUTTING_DOWN sent, unanswered")
            double.answerDelay.withLock { $0 = .zero }
            await double.dropConnections()
            try await running.value
            let states = double.recorded.withLock { $0.lifecycle }
            #expect(states.last == .off && states.filter { $0 == .off }.count == 1, "\(states)")
            #expect(double.recorded.withLock { $0.connections } == 2)
            #expect(session.lifecycle.count == 0, "everything acknowledged")
        }
    }

    /// Keepalive pings are answered by a live control plane: the connection is kept.
    @Test func keepalivePingsKeepAHealthyConnection() async throws {
        let double = ControlPlaneDouble()
        try await double.run { url in
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.pingInterval = .milliseconds(50)
            // Generous: a loaded host has taken more than 5 s to answer a ping.
            configuration.pingTimeout = .seconds(30)
            let session = ControlPlaneSession(
                configuration: configuration,
                dialer: WebSocketDialer(baseURL: url, token: double.token, version: "2.10", logger: Self.quiet),
                logger: Self.quiet)
            let running = Task { try await session.run() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.lifecycle.count } == 2 })
            try await Task.sleep(for: .milliseconds(600))
            #expect(session.connectionCount == 1)
            #expect(double.recorded.withLock { $0.connections } == 1)
            session.beginShutdown()
            try await running.value
        }
    }

    /// A path that dies before the manifest's answer (after the upgrade) is noticed by the
    /// keepalive pings, which run from the dial on, and the session dials again. Before, the
    /// pings began after the manifest: the agent waited for its answer for ever, with no
    /// scripts and its lifecycle at CREATED.
    @Test func aPathThatDiesBeforeTheManifestIsDialledAgain() async throws {
        // A relay whose connections, once it gets SIGUSR1, swallow everything both ways
        // without closing (a dead NAT mapping); later connections pass again.
        let relay = """
            import signal, socket, sys, threading
            generation = [0]
            signal.signal(signal.SIGUSR1, lambda *_: generation.__setitem__(0, generation[0] + 1))
            listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(8)
            print(listener.getsockname()[1], flush=True)
            def pump(a, b, born):
                try:
                    while True:
                        data = a.recv(65536)
                        if not data: break
                        if generation[0] == born: b.sendall(data)
                except OSError:
                    pass
            while True:
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                for pair in ((client, upstream), (upstream, client)):
                    threading.Thread(target=pump, args=(*pair, generation[0]), daemon=True).start()
            """
        let double = ControlPlaneDouble()
        try await double.run { url in
            let port = try #require(url.split(separator: ":").last.map(String.init))
            let process = try #require(ChildProgram.start(["/usr/bin/python3", "-c", relay, port]))
            defer { process.kill() }
            let relayPort = try #require(Int(process.readLine(timeout: .seconds(60))))
            // The first manifest is not answered before the path dies (its answer, 30 s later,
            // is swallowed by the dead path).
            double.manifestDelay.withLock { $0 = .seconds(30) }
            var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
            configuration.pingInterval = .milliseconds(100)
            configuration.pingTimeout = .seconds(2)
            let session = ControlPlaneSession(
                configuration: configuration,
                dialer: WebSocketDialer(baseURL: "http://127.0.0.1:\(relayPort)", token: double.token, version: "2.10", logger: Self.quiet),
                logger: Self.quiet)
            let running = Task { try await session.run() }
            defer { running.cancel() }
            #expect(await eventually(timeout: .seconds(30)) { double.recorded.withLock { $0.manifests } == 1 })
            _ = kill(process.pid, SIGUSR1)
            double.manifestDelay.withLock { $0 = .zero }
            #expect(
                await eventually(timeout: .seconds(60)) { double.recorded.withLock { $0.connections } >= 2 && session.connectionCount >= 1 },
                "dialled again once the pings went unanswered")
            session.beginShutdown()
            try await running.value
        }
    }

    @Test func outboxPeeksWithinAByteBudget() {
        let outbox = Outbox<Int>(name: "t", capacity: 10)
        for size in [400, 400, 400, 5000, 1] { outbox.append(size) }
        let first = outbox.peek(10, budget: 1000, size: { $0 })!
        #expect(first.items == [400, 400])
        outbox.acknowledge(through: first.through)
        #expect(outbox.peek(10, budget: 1000, size: { $0 })!.items == [400])
        outbox.acknowledge(through: outbox.peek(1)!.through)
        // One item over the budget still goes, alone.
        let big = outbox.peek(10, budget: 1000, size: { $0 })!
        #expect(big.items == [5000])
        outbox.reject(through: big.through, reason: "too big")
        #expect(outbox.rejected == 1)
        #expect(outbox.peek(10)?.items == [1])
    }

    /// An item still queued can be taken back by its receipt (it leaves the queue, its
    /// outcome is `.abandoned`); once handed out to be sent, or settled, it cannot.
    @Test func outboxItemsAreWithdrawnOnlyBeforeTheyAreSent() {
        let outbox = Outbox<Int>(name: "t", capacity: 10)
        let receipts = (0..<3).map { _ in UpwardReceipt() }
        for (index, receipt) in receipts.enumerated() { outbox.append(index, receipt: receipt) }
        #expect(receipts[1].withdraw() && receipts[1].outcome == .abandoned)
        #expect(outbox.count == 2 && !receipts[1].withdraw(), "gone, and only once")
        let (through, items) = outbox.peek(1)!
        #expect(items == [0])
        #expect(!receipts[0].withdraw() && receipts[0].outcome == nil, "on its way: it stays")
        outbox.acknowledge(through: through)
        #expect(receipts[0].outcome == .delivered && !receipts[0].withdraw())
        #expect(receipts[2].withdraw() && outbox.isEmpty)
        #expect(!UpwardReceipt().withdraw(), "a receipt no queue holds cannot be withdrawn")
    }

    @Test func outboxOverflowIsCounted() {
        let outbox = Outbox<Int>(name: "t", capacity: 3)
        for i in 0..<5 { outbox.append(i) }
        #expect(outbox.dropped == 2)
        let (through, items) = outbox.peek(10)!
        #expect(items == [2, 3, 4])
        outbox.append(5)  // drops 2 while 2...4 are "in flight"
        outbox.acknowledge(through: through)
        #expect(outbox.peek(10)?.items == [5])
    }

    @Test func backoffSchedule() {
        let expected = [0.0, 0.1618, 0.2618, 0.4236, 0.6854, 1.109, 1.794, 2.903, 4.697, 7.600, 10.0, 10.0]
        for (attempt, seconds) in expected.enumerated() {
            let d = ControlPlaneSession.reconnectBackoff.ceiling(afterFailures: attempt)
            let actual = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
            #expect(abs(actual - seconds) < 0.01, "attempt \(attempt): \(actual)")
        }
        var backoff = ControlPlaneSession.reconnectBackoff
        #expect(backoff.next() == .zero)
        for _ in 0..<20 { _ = backoff.next() }
        for _ in 0..<50 {
            let jittered = backoff.next()
            #expect(jittered >= .seconds(5) && jittered <= .seconds(10), "within the cap: \(jittered)")
        }
        backoff.reset()
        #expect(backoff.next() == .zero)
    }

    @Test func standaloneDrainsToTheLog() async throws {
        let session = ControlPlaneSession(configuration: .init(agentVersion: "0.1.0"), dialer: nil, logger: Self.quiet)
        let receipt = session.send(AppStatusReport(slug: "", state: .working))
        let running = Task { try await session.run() }
        #expect(await eventually(timeout: .seconds(30)) { session.appStatus.isEmpty && session.lifecycle.isEmpty })
        #expect(await receipt.wait() == .logged)
        session.beginShutdown()
        try await running.value
        #expect(session.lifecycle.isEmpty)
    }
}
