import AgentSystem
import Dispatch
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The child reactor with real children; each test has a reactor of its own and waits for
/// events (with generous bounds), never for time to pass.
struct ChildReactorTests {
    static let bound: Duration = .seconds(30)

    static func spec(_ script: String, output: Int32 = -1, reaping: ChildLife.Reaping = .atExit) -> ChildSpec {
        ChildSpec(
            executable: "/bin/sh", arguments: ["/bin/sh", "-c", script], environment: ["PATH=/usr/bin:/bin"], output: output,
            reaping: reaping)
    }

    /// A pipe whose read end the reactor reads into a buffer: `seen` opens once the text
    /// holds `needle`, `closed` at EOF.
    final class Reader: Sendable {
        let bytes = Mutex<[UInt8]>([])
        let seen = Latch()
        let closed = Latch()
        let writeEnd: Int32

        init(_ reactor: ChildReactor, needle: String) {
            let pipe = ChildPipe.output()!
            writeEnd = pipe.write
            reactor.watchReadable(pipe.read, closed: { [closed] in closed.open() }) { [self] fd in
                var chunk = [UInt8](repeating: 0, count: 4096)
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    let text = self.bytes.withLock { bytes in
                        bytes += chunk[0..<n]
                        return String(decoding: bytes, as: UTF8.self)
                    }
                    if text.contains(needle) { self.seen.open() }
                    return .keep
                }
                return n < 0 && (errno == EAGAIN || errno == EINTR) ? .keep : .close
            }
        }

        /// Waits (bounded) until the needle was read.
        func waitSeen() async -> Bool {
            await sleep(for: ChildReactorTests.bound, orUntil: { [seen] in await seen.wait() }) == .signalled
        }
    }

    @Test func thousandsOfShortChildrenAreEachReportedOnceAndReaped() async throws {
        let reactor = ChildReactor(name: "test-children")
        let reports = Atomic<Int>(0)
        var children: [(Child, Int32)] = []
        for batch in 0..<40 {
            var spawned: [(Child, Int32)] = []
            for index in 0..<50 {
                let fails = (batch + index) % 2 == 1
                let program = fails ? "/bin/false" : "/bin/true"
                let child = try reactor.spawn(ChildSpec(executable: program, arguments: [program], environment: []))
                child.onExit { _ in reports.add(1, ordering: .relaxed) }
                spawned.append((child, fails ? 0x100 : 0))
            }
            for (child, expected) in spawned {
                let status = await child.exited(within: Self.bound)
                #expect(status == expected)
            }
            children += spawned
        }
        #expect(children.count == 2000)
        #expect(reports.load(ordering: .relaxed) == 2000)
        for (child, _) in children {
            guard case .reaped = child.life.phase else {
                Issue.record("child \(child.pid) not reaped: \(child.life.phase)")
                break
            }
        }
        #expect(children.allSatisfy { !$0.0.signal(0) }, "a reaped child is never signalled")
        #expect(reactor.watchedCount == 0)
    }

    @Test func aWaitForTheExitEndsAfterEveryExitObserverRan() async throws {
        let reactor = ChildReactor(name: "test-children")
        let child = try reactor.spawn(Self.spec("exec sleep 600"))
        let inFirst = Latch()
        let secondRan = Atomic<Bool>(false)
        // The first observer holds the delivery for half a second: meanwhile the status is
        // read and the second observer has not run.
        child.onExit { _ in
            inFirst.open()
            usleep(500_000)
        }
        child.onExit { _ in secondRan.store(true, ordering: .relaxed) }
        _ = child.signal(SIGKILL)
        #expect(await sleep(for: Self.bound, orUntil: { await inFirst.wait() }) == .signalled)
        let status = await child.exited(within: Self.bound)
        #expect(status == SIGKILL && secondRan.load(ordering: .relaxed), "ended before the observers ran")
    }

    @Test func aChildThatIgnoresSIGTERMIsKilledAfterTheGrace() async throws {
        let reactor = ChildReactor(name: "test-children")
        let reader = Reader(reactor, needle: "ready")
        let child = try reactor.spawn(Self.spec("trap '' TERM; echo ready; exec sleep 600", output: reader.writeEnd))
        close(reader.writeEnd)
        #expect(await reader.waitSeen())
        let status = await child.terminate(SIGTERM, grace: .milliseconds(200), bound: Self.bound)
        #expect(status.map { $0 & 0x7f } == SIGKILL)
        #expect(!child.signal(0))
    }

    @Test func aGrandchildHoldingThePipeDoesNotHoldTheExit() async throws {
        let reactor = ChildReactor(name: "test-children")
        let reader = Reader(reactor, needle: "started")
        let child = try reactor.spawn(
            Self.spec("sleep 600 & echo started", output: reader.writeEnd, reaping: .whenReleased))
        close(reader.writeEnd)
        let status = await child.exited(within: Self.bound)
        #expect(status == 0)
        #expect(await reader.waitSeen())
        #expect(!reader.closed.isOpen, "the background sleep still holds the pipe")
        #expect(child.life.phase == .exited(status: 0), "held: its group is still ours")
        #expect(child.signal(SIGKILL), "the group reaches the grandchild")
        let eof = await sleep(for: Self.bound, orUntil: { await reader.closed.wait() })
        #expect(eof == .signalled)
        child.release()
        #expect(child.life.phase == .reaped(status: 0))
        #expect(!child.signal(SIGKILL))
    }

    @Test func aProgramThatCannotStartSaysWhy() {
        let reactor = ChildReactor(name: "test-children")
        #expect(throws: ChildSpawnError.self) {
            try reactor.spawn(ChildSpec(executable: "/nonexistent/program", arguments: ["x"], environment: []))
        }
        do {
            _ = try reactor.spawn(
                ChildSpec(executable: "/bin/true", arguments: ["true"], environment: [], directory: "/nonexistent/directory"))
            Issue.record("spawned")
        } catch {
            #expect(error.step == .directory)
            #expect(error.errno == ENOENT)
        }
    }

    @Test func aChildWithAParentDeathSignalIsSpawnedOnTheReactor() async throws {
        let reactor = ChildReactor(name: "test-children")
        var spec = Self.spec("exit 7")
        spec.parentDeathSignal = SIGTERM
        let child = try await reactor.spawnOnReactor(spec)
        #expect(await child.exited(within: Self.bound) == 7 << 8)
    }

    @Test func timersFireInOrderAndACancelledOneNever() async {
        let reactor = ChildReactor(name: "test-children")
        let fired = Mutex<[Int]>([])
        let done = Latch()
        // The reactor's thread is held in a job while the timers are set and one cancelled,
        // so none can fire before the cancel however late this task runs.
        let holding = Latch()
        let gate = DispatchSemaphore(value: 0)
        reactor.run {
            holding.open()
            gate.wait()
        }
        #expect(await sleep(for: Self.bound, orUntil: { await holding.wait() }) == .signalled)
        let now = ContinuousClock.now
        let cancelled = reactor.schedule(at: now + .milliseconds(1)) { fired.withLock { $0.append(0) } }
        reactor.cancelTimer(cancelled)
        reactor.schedule(at: now + .milliseconds(2)) { fired.withLock { $0.append(2) } }
        reactor.schedule(at: now + .milliseconds(1)) { fired.withLock { $0.append(1) } }
        reactor.schedule(at: now + .milliseconds(3)) { done.open() }
        gate.signal()
        #expect(await sleep(for: Self.bound, orUntil: { await done.wait() }) == .signalled)
        #expect(fired.withLock { $0 } == [1, 2])
    }

    @Test func observersRegisteredAfterTheExitRunAtOnce() async throws {
        let reactor = ChildReactor(name: "test-children")
        let child = try reactor.spawn(Self.spec("exit 3"))
        #expect(await child.exited(within: Self.bound) == 3 << 8)
        let seen = Mutex<Int32?>(nil)
        child.onExit { status in seen.withLock { $0 = status } }
        #expect(seen.withLock { $0 } == 3 << 8)
    }
}
